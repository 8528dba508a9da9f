// Package aptinstall installs Debian packages with apt-get, for the test
// harnesses that start real servers (Slurm, Prometheus) and for the embedded
// ClickHouse of `heliostat up`. It installs only as root on a machine with
// apt-get, tries the install before refreshing the package lists (so a
// machine whose lists are current does not wait for apt-get update), and
// runs apt-get update and the install once more when the first try fails.
package aptinstall

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrUnavailable means this machine cannot install packages: the process is
// not root, or there is no apt-get. The wrapping error says which.
var ErrUnavailable = errors.New("cannot install Debian packages here")

// Runner runs a command and returns its combined output.
type Runner func(name string, args ...string) ([]byte, error)

// Apt installs packages. Its zero value is not usable; New returns one for
// this machine.
type Apt struct {
	// Root reports whether the process may install packages.
	Root bool
	// LookPath finds apt-get.
	LookPath func(string) (string, error)
	// Run runs apt-get.
	Run Runner
}

// New returns an Apt that runs the real apt-get, non-interactively.
func New() Apt {
	return Apt{
		Root:     os.Geteuid() == 0,
		LookPath: exec.LookPath,
		Run: func(name string, args ...string) ([]byte, error) {
			cmd := exec.Command(name, args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		},
	}
}

// Install runs `apt-get install -y -qq FLAGS… PKGS…`; when that fails it runs
// `apt-get update -qq` and the install again. An error wrapping
// ErrUnavailable says why nothing was tried; any other error names the
// apt-get step that failed and ends with the last lines of its output.
func (a Apt) Install(flags []string, pkgs ...string) error {
	if len(pkgs) == 0 {
		return nil
	}
	want := strings.Join(pkgs, " ")
	if !a.Root {
		return fmt.Errorf("%w: not root (as root: apt-get install %s)", ErrUnavailable, want)
	}
	apt, err := a.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("%w: there is no apt-get (wanted: %s)", ErrUnavailable, want)
	}
	args := append(append([]string{"install", "-y", "-qq"}, flags...), pkgs...)
	if _, err := a.Run(apt, args...); err == nil {
		return nil
	}
	if out, err := a.Run(apt, "update", "-qq"); err != nil {
		return fmt.Errorf("apt-get update: %w: %s", err, Tail(out, 400))
	}
	if out, err := a.Run(apt, args...); err != nil {
		return fmt.Errorf("apt-get install %s: %w: %s", want, err, Tail(out, 400))
	}
	return nil
}

// Tail returns at most the last n bytes of b, trimmed: the end of a failed
// command's output, where its error usually is.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
