// Package slurmtest starts a real one-machine Slurm 22.05 cluster for tests:
// munged, one slurmctld and four slurmd (gpu1..gpu4, eight fake GPUs each), on
// a private directory and free ports, configured from shared/slurm in the
// repository's parent directory. Tests submit real jobs with sbatch and read
// them back with squeue, scontrol and the job-completion log.
//
// Starting slurmctld takes seconds, so a test package normally shares one
// cluster: call Shared from its tests and wrap m.Run with Main in TestMain.
//
// A private cluster started with Options.Accounting also keeps job accounting:
// a private MariaDB and slurmdbd start before slurmctld, so that sacct (and
// sacctmgr) work against the cluster.
package slurmtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/aptinstall"
)

// Nodes are the node names of every cluster this package starts.
var Nodes = []string{"gpu1", "gpu2", "gpu3", "gpu4"}

// GPUsPerNode is the number of fake GPUs each node has (gres.conf).
const GPUsPerNode = 8

// errSkip marks a start failure that is a missing prerequisite (not root, no
// packages) rather than a broken cluster; outside CI the test is skipped.
var errSkip = errors.New("slurmtest: prerequisite missing")

// Cluster is a running test cluster. Its methods are safe for concurrent use.
type Cluster struct {
	dir   string
	conf  string
	procs []*proc // slurmctld first, then the slurmd
	stop  sync.Once

	// With accounting: the ports of slurmdbd and MariaDB, and the two
	// daemons in the order they started (MariaDB, slurmdbd), stopped after
	// slurmctld and slurmd in the reverse order.
	accounting bool
	dbdPort    int
	dbPort     int
	services   []*proc
}

// proc is a daemon the cluster started; done closes when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Dir is the cluster's private directory (state/, spool/, log/, pid files).
func (c *Cluster) Dir() string { return c.dir }

// Conf is the path of the cluster's slurm.conf.
func (c *Cluster) Conf() string { return c.conf }

// Env returns the environment for Slurm commands run against the cluster: the
// process environment with SLURM_CONF pointing at it.
func (c *Cluster) Env() []string {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.conf)
}

// JobCompLog is the path of the job-completion log (jobcomp/filetxt).
func (c *Cluster) JobCompLog() string { return filepath.Join(c.dir, "log", "jobcomp.log") }

// SlurmctldLog is the path of slurmctld's log.
func (c *Cluster) SlurmctldLog() string { return filepath.Join(c.dir, "log", "slurmctld.log") }

// Accounting reports whether the cluster keeps job accounting (slurmdbd on a
// private MariaDB; Options.Accounting), so that sacct works against it.
func (c *Cluster) Accounting() bool { return c.accounting }

// SlurmdbdLog is the path of slurmdbd's log; the file exists only on a
// cluster with Accounting.
func (c *Cluster) SlurmdbdLog() string { return filepath.Join(c.dir, "log", "slurmdbd.log") }

// mariadbLog is the path of the private MariaDB's error log.
func (c *Cluster) mariadbLog() string { return filepath.Join(c.dir, "log", "mariadb.log") }

// mariadbSocket is the path of the private MariaDB's Unix socket.
func (c *Cluster) mariadbSocket() string { return filepath.Join(c.dir, "mysql.sock") }

// SuspendLog and ResumeLog are the files where suspend.sh and resume.sh append
// one line with their arguments per call (node power-down and power-up).
// Besides recording, suspend.sh stops the nodes' slurmd and resume.sh starts
// it again, as a real power switch would; a cluster with a node powered down
// has one of its daemons gone, so do not call RestartController on it.
func (c *Cluster) SuspendLog() string { return filepath.Join(c.dir, "suspend.log") }

// ResumeLog: see SuspendLog.
func (c *Cluster) ResumeLog() string { return filepath.Join(c.dir, "resume.log") }

// Run runs a Slurm command (sbatch, scontrol, squeue, scancel, sinfo…) against
// the cluster in its directory and returns its standard output. A failure
// carries the command's standard error.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	cmd.Dir = c.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("slurmtest: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Submit runs sbatch --parsable with args and returns the job id (for an
// array, the array's job id).
func (c *Cluster) Submit(ctx context.Context, args ...string) (string, error) {
	out, err := c.Run(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "ID;cluster" on federated setups
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("slurmtest: sbatch printed %q, want a job id", out)
	}
	return id, nil
}

// State returns a job's state as squeue prints it (%T, e.g. "RUNNING",
// "COMPLETED"), or "" when slurmctld no longer knows the job. id may be
// "J" or an array task "J_T".
func (c *Cluster) State(ctx context.Context, id string) (string, error) {
	out, err := c.Run(ctx, "squeue", "-h", "--states=all", "-j", id, "-o", "%T")
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(firstLine(out)), nil
}

// finalStates are the states squeue shows for a job that has ended.
var finalStates = map[string]bool{
	"COMPLETED": true, "FAILED": true, "CANCELLED": true, "TIMEOUT": true, "NODE_FAIL": true,
	"PREEMPTED": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true,
	"SPECIAL_EXIT": true, "REVOKED": true,
}

// WaitJob waits until every listed job (ids as for State) has ended, polling
// squeue, and returns their final states in order. It fails when ctx ends
// first, naming the jobs still running.
func (c *Cluster) WaitJob(ctx context.Context, ids ...string) ([]string, error) {
	return c.WaitState(ctx, func(s string) bool { return finalStates[s] }, ids...)
}

// WaitState waits until ok holds for the squeue state of every listed job and
// returns the states.
func (c *Cluster) WaitState(ctx context.Context, ok func(state string) bool, ids ...string) ([]string, error) {
	states := make([]string, len(ids))
	for {
		done := true
		for i, id := range ids {
			if ok(states[i]) && states[i] != "" {
				continue
			}
			s, err := c.State(ctx, id)
			if err != nil {
				return states, err
			}
			states[i] = s
			if !ok(s) {
				done = false
			}
		}
		if done {
			return states, nil
		}
		select {
		case <-ctx.Done():
			return states, fmt.Errorf("slurmtest: wait for jobs %v (now %v): %w", ids, states, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// LogTail returns the last n lines of slurmctld's log, for failure messages.
func (c *Cluster) LogTail(n int) string { return tailFile(c.SlurmctldLog(), n) }

// failureLogs returns the tails of slurmctld's log and, with accounting, of
// slurmdbd's and MariaDB's, headed by their paths.
func (c *Cluster) failureLogs(n int) string {
	s := fmt.Sprintf("slurmctld log tail (%s):\n%s", c.dir, c.LogTail(n))
	if c.accounting {
		s += fmt.Sprintf("\nslurmdbd log tail (%s):\n%s", c.SlurmdbdLog(), tailFile(c.SlurmdbdLog(), n))
		s += fmt.Sprintf("\nmariadb log tail (%s):\n%s", c.mariadbLog(), tailFile(c.mariadbLog(), n/2))
	}
	return s
}

// Stop cancels the cluster's jobs and stops slurmd and slurmctld by their pid
// files, waiting for them to exit; with accounting it then stops slurmdbd and
// MariaDB, in that order (slurmctld hands its last records to slurmdbd as it
// stops). It is idempotent; Start and Shared arrange for it to run.
func (c *Cluster) Stop() {
	c.stop.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if out, err := c.Run(ctx, "squeue", "-h", "-o", "%A"); err == nil && strings.TrimSpace(out) != "" {
			_, _ = c.Run(ctx, "scancel", strings.Fields(out)...)
			// Let the cancelled jobs end before slurmd stops: a job's
			// slurmstepd whose slurmd is gone stays behind, orphaned,
			// retrying to report the job's end.
			_ = c.waitFor(ctx, "cancelled jobs to end", func() (bool, error) {
				out, err := c.Run(ctx, "squeue", "-h", "-o", "%A")
				return err == nil && strings.TrimSpace(out) == "", nil
			})
		}
		cancel()
		pidFiles := []string{}
		for _, n := range Nodes {
			pidFiles = append(pidFiles, filepath.Join(c.dir, "slurmd."+n+".pid"))
		}
		pidFiles = append(pidFiles, filepath.Join(c.dir, "slurmctld.pid"))
		for _, f := range pidFiles {
			if pid := readPID(f); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		// The daemons run in the foreground as our children: reap them, and
		// kill those that do not stop in time.
		for _, p := range c.procs {
			p.terminate(10 * time.Second)
		}
		for i := len(c.services) - 1; i >= 0; i-- {
			c.services[i].terminate(20 * time.Second)
		}
		c.killLeftovers()
	})
}

// killLeftovers kills, once slurmctld and the daemons are gone, every
// process still running for the cluster: those whose command line names its
// directory or whose environment sets SLURM_CONF to its slurm.conf. Two kinds
// outlived the test binaries: a slurmd that resume.sh started after Stop (it
// sleeps a second first, and its slurmd -b runs in a session of its own,
// named by no pid file Stop read; every clean-clone CI run ended with one,
// gpu3's, from TestSlurmPowerUpOfPoweredNode, which returns while gpu3 is
// powering up), and a job's slurmstepd (renamed "slurmstepd: [1.batch]")
// whose slurmd stopped before the job ended. Each held on, its directory
// removed, and a slurmd kept a port of the range the next clusters draw
// from. A second sweep catches what a process of the first forked as it
// was killed.
func (c *Cluster) killLeftovers() {
	mark, confVar := []byte(c.dir+"/"), []byte("SLURM_CONF="+c.conf)
	for sweep := range 2 {
		if sweep > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return // not Linux: nothing to sweep with
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			environ, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			if bytes.Contains(cmdline, mark) || slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(v []byte) bool { return bytes.Equal(v, confVar) }) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// terminate sends SIGTERM and waits for the process to exit, killing it when
// it has not within wait.
func (p *proc) terminate(wait time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

var (
	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Main runs a test binary's tests and stops the shared cluster afterwards. Use
// it from TestMain: os.Exit(slurmtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	StopShared(code)
	return code
}

// StopShared stops the shared cluster, if one was started, and removes its
// directory unless the tests failed (code != 0). Call it after m.Run when
// TestMain cannot use Main, e.g. because it wraps m.Run with schematest.Main.
func StopShared(code int) {
	if shared == nil {
		return
	}
	shared.Stop()
	if code == 0 {
		_ = os.RemoveAll(shared.dir)
	} else {
		fmt.Fprintf(os.Stderr, "slurmtest: cluster directory kept for inspection: %s\n", shared.dir)
	}
}

// Shared returns the package's shared cluster, starting it on first use. When
// it cannot start, the test fails (under CI=true, or when Slurm is installed
// but broken) or is skipped (not root, packages not installable) with the
// reason. Use Main in TestMain so that the cluster is stopped.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		shared, sharedErr = start(Options{})
	})
	if sharedErr != nil {
		fail(t, sharedErr)
	}
	return shared
}

// Options change a private cluster's slurm.conf.
type Options struct {
	// Conf sets slurm.conf parameters: each key replaces the template's
	// line of that name, or is appended when the template has none, e.g.
	// {"SuspendTimeout": "5"}. It is applied last, so it also overrides
	// what Accounting sets.
	Conf map[string]string

	// Accounting starts job accounting with the cluster: a private MariaDB
	// (data in Dir()/mysql) and slurmdbd (slurmdbd.conf beside slurm.conf),
	// both up before slurmctld, which is configured with
	// AccountingStorageType=accounting_storage/slurmdbd,
	// AccountingStorageTRES=gres/gpu (GPUs appear in sacct's TRES) and
	// JobAcctGatherType=jobacct_gather/none. sacct and sacctmgr then work
	// through Run. It needs root and the packages slurmdbd and
	// mariadb-server, which start installs when missing. slurmctld sends
	// job records to slurmdbd asynchronously: poll sacct for a job that
	// just ended.
	Accounting bool

	// DbdConf sets slurmdbd.conf parameters as Conf does slurm.conf's,
	// e.g. {"PrivateData": "jobs"}: slurmdbd's own settings, which govern
	// what sacct and sacctmgr show. Only with Accounting.
	DbdConf map[string]string

	// GPUTypes, when set, types each node's GPUsPerNode fake GPUs: the
	// counts of each type, in order (e.g. {{"a100", 4}, {"v100", 4}}: a
	// node with GPUs of two types), adding up to GPUsPerNode. Empty: the
	// shared gres.conf's untyped GPUs.
	GPUTypes []GPUType

	// Gres adds GRES beside the GPUs on every node, as slurm.conf's node
	// Gres= writes them, e.g. "tmpdisk:100G": a count-only resource (no
	// device files; Slurm shows its count in bytes), whose name joins
	// GresTypes.
	Gres []string
}

// GPUType is a count of GPUs of one type on each node (Options.GPUTypes).
type GPUType struct {
	Name  string
	Count int
}

// typedGres returns slurm.conf's Gres value and gres.conf for types, the
// fake devices (/dev/tty0–7, as the shared gres.conf has them) split among
// the types in order.
func typedGres(types []GPUType) (conf, gresConf string, err error) {
	var specs []string
	gresConf = "AutoDetect=off\n"
	next := 0
	for _, t := range types {
		if t.Name == "" || t.Count <= 0 || strings.ContainsAny(t.Name, ":,= ") {
			return "", "", fmt.Errorf("slurmtest: GPU type %+v: want a name and a count above 0", t)
		}
		specs = append(specs, fmt.Sprintf("gpu:%s:%d", t.Name, t.Count))
		gresConf += fmt.Sprintf("NodeName=gpu[1-%d] Name=gpu Type=%s File=/dev/tty[%d-%d]\n", len(Nodes), t.Name, next, next+t.Count-1)
		next += t.Count
	}
	if next != GPUsPerNode {
		return "", "", fmt.Errorf("slurmtest: GPU types %+v add up to %d GPUs, not %d", types, next, GPUsPerNode)
	}
	return strings.Join(specs, ","), gresConf, nil
}

// Start starts a private cluster for one test and stops it when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a private cluster with opts for one test and stops it
// when the test ends.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := start(opts)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("%s", c.failureLogs(30))
			t.Logf("cluster directory kept: %s", c.dir)
			return
		}
		_ = os.RemoveAll(c.dir)
	})
	return c
}

func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errSkip) && os.Getenv("CI") != "true" {
		t.Skipf("no test Slurm cluster: %v", err)
	}
	t.Fatalf("start test Slurm cluster: %v", err)
}

// start brings a cluster up, stopping whatever it started when a later step
// fails.
func start(opts Options) (c *Cluster, err error) {
	shared, err := sharedDir()
	if err != nil {
		return nil, err
	}
	if len(opts.DbdConf) > 0 && !opts.Accounting {
		return nil, errors.New("slurmtest: Options.DbdConf without Accounting: there is no slurmdbd.conf")
	}
	if opts.Accounting && os.Geteuid() != 0 {
		// slurmdbd.conf must belong to SlurmUser (root), and MariaDB runs
		// with --user=root.
		return nil, fmt.Errorf("%w: Slurm accounting needs root", errSkip)
	}
	if err := ensurePackages(opts.Accounting); err != nil {
		return nil, err
	}
	if err := ensureMunge(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "heliostat-slurm-*")
	if err != nil {
		return nil, fmt.Errorf("slurmtest: %w", err)
	}
	// Jobs submitted with --uid run as that user: slurmstepd must reach
	// their scripts in the spool directory below.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("slurmtest: %w", err)
	}
	c = &Cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), accounting: opts.Accounting}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w\n%s", err, c.failureLogs(20))
		}
	}()
	if err := c.writeConfig(shared, opts); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if c.accounting {
		if err := c.startAccounting(ctx); err != nil {
			return c, err
		}
	}
	if err := c.spawn("slurmctld", "-D", "-f", c.conf); err != nil {
		return c, err
	}
	// slurmd registers with slurmctld: wait until it answers.
	if err := c.waitFor(ctx, "slurmctld to answer", func() (bool, error) {
		_, err := c.Run(ctx, "scontrol", "ping")
		return err == nil, nil
	}); err != nil {
		return c, err
	}
	for _, n := range Nodes {
		if err := c.spawn("slurmd", "-D", "-f", c.conf, "-N", n); err != nil {
			return c, err
		}
	}
	return c, c.waitIdle(ctx)
}

// waitIdle waits until sinfo shows every node idle, failing at once on an
// INVAL node.
func (c *Cluster) waitIdle(ctx context.Context) error {
	return c.waitFor(ctx, "all nodes idle", func() (bool, error) {
		out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N %t")
		if err != nil {
			return false, nil
		}
		// A node in several partitions has a line for each.
		idle := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			if strings.HasPrefix(f[1], "inval") {
				// README: INVAL only clears with a fresh state directory; it
				// means the gres.conf does not match slurm.conf.
				return false, fmt.Errorf("slurmtest: node %s is INVAL (gres.conf and slurm.conf disagree): sinfo: %s", f[0], strings.TrimSpace(out))
			}
			if f[1] == "idle" {
				idle[f[0]] = true
			}
		}
		return len(idle) == len(Nodes), nil
	})
}

// RestartController stops slurmctld and starts it again, with an empty state
// directory when clean is set: slurmctld then forgets every job (the
// job-completion log stays), as after a cold start. It waits until the nodes
// are idle again. Do not call it on the Shared cluster.
func (c *Cluster) RestartController(ctx context.Context, clean bool) error {
	p := c.procs[0]
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("slurmtest: stop slurmctld: %w", ctx.Err())
	}
	if clean {
		state := filepath.Join(c.dir, "state")
		if err := os.RemoveAll(state); err != nil {
			return fmt.Errorf("slurmtest: %w", err)
		}
		if err := os.MkdirAll(state, 0o755); err != nil {
			return fmt.Errorf("slurmtest: %w", err)
		}
	}
	last := len(c.procs)
	if err := c.spawn("slurmctld", "-D", "-f", c.conf); err != nil {
		return err
	}
	// Keep slurmctld first: Stop signals the processes in order.
	c.procs[0], c.procs = c.procs[last], c.procs[:last]
	if err := c.waitFor(ctx, "slurmctld to answer", func() (bool, error) {
		_, err := c.Run(ctx, "scontrol", "ping")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, c.LogTail(20))
	}
	if err := c.waitIdle(ctx); err != nil {
		return fmt.Errorf("%w\n%s", err, c.LogTail(20))
	}
	return nil
}

// waitFor polls cond until it is true, returns an error, or ctx ends.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		for _, p := range slices.Concat(c.services, c.procs) {
			select {
			case <-p.done:
				return fmt.Errorf("slurmtest: %s exited (%v) while waiting for %s", strings.Join(p.cmd.Args, " "), p.cmd.ProcessState, what)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slurmtest: wait for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// spawn starts a daemon in the foreground as a child that dies with the test
// process, its output going to the cluster's log directory, and adds it to
// c.procs.
func (c *Cluster) spawn(name string, args ...string) error {
	p, err := c.launch(name+"."+strconv.Itoa(len(c.procs))+".out", name, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// launch starts a daemon as spawn does, its output going to log/out, without
// adding it to c.procs.
func (c *Cluster) launch(out, name string, args ...string) (*proc, error) {
	f, err := os.OpenFile(filepath.Join(c.dir, "log", out), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("slurmtest: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("slurmtest: start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// writeConfig fills the private directory: slurm.conf from slurm.conf.in with
// the directory and free ports and opts applied, gres.conf, and the
// power-saving scripts.
func (c *Cluster) writeConfig(shared string, opts Options) error {
	for _, d := range []string{"state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return fmt.Errorf("slurmtest: %w", err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join(shared, "slurm.conf.in"))
	if err != nil {
		return fmt.Errorf("slurmtest: %w", err)
	}
	gres, err := os.ReadFile(filepath.Join(shared, "gres.conf"))
	if err != nil {
		return fmt.Errorf("slurmtest: %w", err)
	}
	ctld, nodes, err := freePorts(len(Nodes))
	if err != nil {
		return err
	}
	repl := []string{"@DIR@", c.dir, "@CTLD_PORT@", strconv.Itoa(ctld)}
	for i := range Nodes {
		repl = append(repl, fmt.Sprintf("@PORT%d@", i), strconv.Itoa(nodes+i))
	}
	var nodeGres string // the node line's Gres= value, when not the template's
	if len(opts.GPUTypes) > 0 {
		typed, typedConf, err := typedGres(opts.GPUTypes)
		if err != nil {
			return err
		}
		nodeGres, gres = typed, []byte(typedConf)
	}
	gresTypes := []string{"gpu"}
	if len(opts.Gres) > 0 {
		if nodeGres == "" {
			nodeGres = fmt.Sprintf("gpu:%d", GPUsPerNode)
		}
		nodeGres += "," + strings.Join(opts.Gres, ",")
		for _, g := range opts.Gres {
			name, _, _ := strings.Cut(g, ":")
			gresTypes = append(gresTypes, name)
		}
	}
	if nodeGres != "" {
		untyped := fmt.Sprintf(" Gres=gpu:%d ", GPUsPerNode)
		if !strings.Contains(string(tmpl), untyped) {
			return fmt.Errorf("slurmtest: %s has no %q to change", filepath.Join(shared, "slurm.conf.in"), strings.TrimSpace(untyped))
		}
		repl = append(repl, untyped, " Gres="+nodeGres+" ")
	}
	conf := strings.NewReplacer(repl...).Replace(string(tmpl))
	if len(gresTypes) > 1 {
		conf = setConf(conf, map[string]string{"GresTypes": strings.Join(gresTypes, ",")})
	}
	if strings.Contains(conf, "@") {
		return fmt.Errorf("slurmtest: %s has a placeholder this harness does not fill: %q", filepath.Join(shared, "slurm.conf.in"), conf[strings.Index(conf, "@"):min(len(conf), strings.Index(conf, "@")+20)])
	}
	var dbdConf string
	if c.accounting {
		if c.dbdPort, err = freePort(ctld, nodes, len(Nodes)); err != nil {
			return err
		}
		if c.dbPort, err = freePort(ctld, nodes, len(Nodes), c.dbdPort); err != nil {
			return err
		}
		conf = setConf(conf, map[string]string{
			"AccountingStorageType": "accounting_storage/slurmdbd",
			"AccountingStorageHost": "localhost",
			"AccountingStoragePort": strconv.Itoa(c.dbdPort),
			"AccountingStorageTRES": "gres/gpu",
			"JobAcctGatherType":     "jobacct_gather/none",
		})
		dbdConf = setConf(c.slurmdbdConf(), opts.DbdConf)
	}
	conf = setConf(conf, opts.Conf)
	suspend, resume, err := c.powerScripts()
	if err != nil {
		return err
	}
	files := map[string]struct {
		data string
		mode os.FileMode
	}{
		"slurm.conf": {conf, 0o644},
		"gres.conf":  {string(gres), 0o644},
		"suspend.sh": {suspend, 0o755},
		"resume.sh":  {resume, 0o755},
	}
	if c.accounting {
		// slurmdbd refuses a slurmdbd.conf others can read (it may hold the
		// database password); it reads the file from $SLURM_CONF's
		// directory, as it has no option naming it.
		files["slurmdbd.conf"] = struct {
			data string
			mode os.FileMode
		}{dbdConf, 0o600}
	}
	for name, f := range files {
		p := filepath.Join(c.dir, name)
		if err := os.WriteFile(p, []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("slurmtest: %w", err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // WriteFile's mode is cut by the umask
			return fmt.Errorf("slurmtest: %w", err)
		}
	}
	return nil
}

// slurmdbdConf returns slurmdbd.conf for the cluster's ports and directory.
func (c *Cluster) slurmdbdConf() string {
	return strings.Join([]string{
		"# slurmdbd for a heliostat test cluster, on a private MariaDB.",
		"AuthType=auth/munge",
		"DbdHost=localhost",
		"DbdPort=" + strconv.Itoa(c.dbdPort),
		"SlurmUser=root",
		"LogFile=" + c.SlurmdbdLog(),
		"PidFile=" + filepath.Join(c.dir, "slurmdbd.pid"),
		"StorageType=accounting_storage/mysql",
		"StorageHost=127.0.0.1",
		"StoragePort=" + strconv.Itoa(c.dbPort),
		"StorageUser=root",
		"StorageLoc=slurm_acct_db",
		"",
	}, "\n")
}

// startAccounting initialises and starts the private MariaDB, then slurmdbd,
// and waits until each answers. slurmdbd creates its tables on first start;
// slurmctld, started afterwards, registers the cluster itself.
func (c *Cluster) startAccounting(ctx context.Context) error {
	data := filepath.Join(c.dir, "mysql")
	// Each cluster's MariaDB has its own tmpdir: with the shared /tmp,
	// concurrent installs (test packages run in parallel) removed one
	// another's temporary tables, and one in two failed with "Unknown table
	// 'mysql.tmp_user_sys'" when six ran at once.
	tmp := filepath.Join(c.dir, "mysql-tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("slurmtest: %w", err)
	}
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+data, "--tmpdir="+tmp,
		"--user=root", "--auth-root-authentication-method=normal", "--skip-test-db")
	install.Dir = c.dir
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("slurmtest: mariadb-install-db: %w: %s", err, installFailure(out))
	}
	db, err := c.launch("mariadbd.out", "mariadbd", "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, "--user=root",
		"--socket="+c.mariadbSocket(), "--port="+strconv.Itoa(c.dbPort), "--bind-address=127.0.0.1",
		"--pid-file="+filepath.Join(c.dir, "mariadb.pid"), "--log-error="+c.mariadbLog())
	if err != nil {
		return err
	}
	c.services = append(c.services, db)
	if err := c.waitFor(ctx, "MariaDB to answer", func() (bool, error) {
		err := exec.CommandContext(ctx, "mariadb", "--no-defaults", "-S", c.mariadbSocket(), "-uroot", "-e", "select 1").Run()
		return err == nil, nil
	}); err != nil {
		return err
	}
	dbd, err := c.launch("slurmdbd.out", "slurmdbd", "-D")
	if err != nil {
		return err
	}
	c.services = append(c.services, dbd)
	return c.waitFor(ctx, "slurmdbd to answer", func() (bool, error) {
		_, err := c.Run(ctx, "sacctmgr", "-n", "-P", "list", "cluster")
		return err == nil, nil
	})
}

// installFailure picks from mariadb-install-db's output the lines that say
// why it failed (ERROR lines and warnings), which come before a long,
// fixed advice text; it falls back to the output's tail.
func installFailure(out []byte) string {
	var why []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "ERROR") || strings.Contains(line, "[Warning]") {
			why = append(why, strings.TrimSpace(line))
		}
	}
	if len(why) == 0 {
		return aptinstall.Tail(out, 600)
	}
	return strings.Join(why, "; ")
}

// setConf replaces the value of each key's line in conf, appending the keys
// it has no line for (in key order, for a stable file).
func setConf(conf string, set map[string]string) string {
	if len(set) == 0 {
		return conf
	}
	done := map[string]bool{}
	lines := strings.Split(conf, "\n")
	for i, line := range lines {
		key, _, ok := strings.Cut(line, "=")
		if v, want := set[key]; ok && want && !strings.HasPrefix(key, "#") {
			lines[i] = key + "=" + v
			done[key] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		lines = append(lines, k+"="+set[k])
	}
	return strings.Join(lines, "\n")
}

// powerScripts returns suspend.sh and resume.sh. Both append their argument
// line to SuspendLog or ResumeLog, then act like a real power switch: suspend
// stops the slurmd of every node in the host list (the node is off), resume
// starts it again (the node boots and registers with slurmctld, which Slurm
// waits for up to ResumeTimeout). slurmctld ends the resume program's
// process group when it returns, so slurmd starts in a session of its own;
// -b makes it report a fresh boot, without which slurmctld does not count the
// node as resumed.
//
// resume.sh waits a second before it starts slurmd. slurmctld counts the node
// as booted only when its boot time (the registration's second less the
// reported uptime) is not before the second of the power-up request, and
// slurmd -b reports 0 or 1 s of uptime depending on whether its start-up
// crossed a second of the system's uptime clock. A slurmd that registered in
// the request's own second with an uptime of 1 was never counted, and the node
// went down at ResumeTimeout: the logs of six such failures of the power-up
// tests all show it. A second's wait rules that out (the boot time is then at
// least the request's second), and a real node takes longer than that to boot.
func (c *Cluster) powerScripts() (suspend, resume string, err error) {
	bins := map[string]string{}
	for _, b := range []string{"scontrol", "slurmd", "setsid"} {
		p, err := exec.LookPath(b)
		if err != nil {
			return "", "", fmt.Errorf("%w: %s not found: %v", errSkip, b, err)
		}
		bins[b] = p
	}
	head := "#!/bin/sh\nexport SLURM_CONF=" + c.conf + "\n"
	suspend = head + "echo \"$@\" >> " + c.SuspendLog() + "\n" +
		"for n in $(" + bins["scontrol"] + " show hostnames \"$1\"); do\n" +
		"  f=" + c.dir + "/slurmd.$n.pid\n" +
		"  [ -f \"$f\" ] && kill \"$(cat \"$f\")\" 2>/dev/null\n" +
		"done\nexit 0\n"
	resume = head + "echo \"$@\" >> " + c.ResumeLog() + "\nsleep 1\n" +
		"for n in $(" + bins["scontrol"] + " show hostnames \"$1\"); do\n" +
		"  " + bins["setsid"] + " " + bins["slurmd"] + " -b -f " + c.conf + " -N \"$n\" >> " + c.dir + "/log/resume.out 2>&1 < /dev/null\n" +
		"done\nexit 0\n"
	return suspend, resume, nil
}

// SuspendCalls returns the argument lines suspend.sh was called with, in
// order (each a host list, e.g. "gpu4" or "gpu[3-4]"); none when it never
// ran.
func (c *Cluster) SuspendCalls() ([]string, error) { return readLines(c.SuspendLog()) }

// ResumeCalls returns the argument lines resume.sh was called with; see
// SuspendCalls.
func (c *Cluster) ResumeCalls() ([]string, error) { return readLines(c.ResumeLog()) }

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slurmtest: %w", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// Slurm's ports are drawn from [portLow, portHigh), below Linux's default
// ephemeral range (32768–60999), from which the other test servers (kfake,
// ClickHouse) take theirs by binding port 0. slurmctld keeps sending RPCs to
// a slurmd port after that slurmd stopped (power-down tests, restarts); were
// the port handed to an embedded Kafka broker of another test package, the
// broker would read the Slurm header's protocol version as an API key it does
// not know, and kfake panics on that. A CI run died of such a panic (kfake
// client_conn.go:128); that a Slurm RPC caused it is inferred, not observed.
const (
	portLow  = 20000
	portHigh = 32000
)

// freePort returns a free port in [portLow, portHigh) outside the slurmctld
// port ctld, the n slurmd ports from first, and avoid.
func freePort(ctld, first, n int, avoid ...int) (int, error) {
	for try := 0; try < 200; try++ {
		p := portLow + rand.IntN(portHigh-portLow)
		if p == ctld || (p >= first && p < first+n) || slices.Contains(avoid, p) {
			continue
		}
		li, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		li.Close()
		return p, nil
	}
	return 0, fmt.Errorf("slurmtest: no free port found in %d..%d", portLow, portHigh-1)
}

// freePorts returns a free port for slurmctld and the first of n consecutive
// free ports for the slurmd (slurm.conf gives them as one range), all in
// [portLow, portHigh).
func freePorts(n int) (ctld, first int, err error) {
	for try := 0; try < 200; try++ {
		base := portLow + rand.IntN(portHigh-portLow-n)
		var ls []net.Listener
		ok := true
		for p := base; p <= base+n; p++ { // base: slurmctld; base+1…base+n: slurmd
			li, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, li)
		}
		for _, li := range ls {
			li.Close()
		}
		if ok {
			return base, base + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("slurmtest: no %d consecutive free ports found in %d..%d", n+1, portLow, portHigh-1)
}

// sharedDir finds shared/slurm beside the repository: it walks up from the
// working directory to go.mod and looks in ../shared/slurm.
func sharedDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("slurmtest: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(filepath.Dir(d), "shared", "slurm")
			if _, err := os.Stat(filepath.Join(p, "slurm.conf.in")); err != nil {
				return "", fmt.Errorf("%w: the Slurm test configuration is missing (want %s/slurm.conf.in and gres.conf beside the module): %v", errSkip, p, err)
			}
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no go.mod above %s to find shared/slurm from", errSkip, wd)
		}
	}
}

// Binaries the harness runs and the Debian packages that provide them; the
// accounting ones are needed only by clusters with Options.Accounting.
var (
	basePackages = map[string]string{
		"slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client", "squeue": "slurm-client",
		"scontrol": "slurm-client", "sinfo": "slurm-client", "munged": "munge", "munge": "munge",
	}
	accountingPackages = map[string]string{
		"slurmdbd": "slurmdbd", "sacct": "slurm-client", "sacctmgr": "slurm-client",
		"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server", "mariadb": "mariadb-server",
	}
)

// ensurePackages installs Debian's Slurm and munge packages (and, for
// accounting, slurmdbd and MariaDB) when a daemon or client is missing and we
// are root.
func ensurePackages(accounting bool) error {
	need := []map[string]string{basePackages}
	if accounting {
		need = append(need, accountingPackages)
	}
	var pkgs []string
	for _, m := range need {
		for bin, pkg := range m {
			if _, err := exec.LookPath(bin); err != nil && !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	slices.Sort(pkgs)
	if err := aptinstall.New().Install(nil, pkgs...); err != nil {
		return fmt.Errorf("%w: Slurm is not fully installed: %v", errSkip, err)
	}
	return nil
}

// ensureMunge creates the munge key when absent and starts munged when a
// credential cannot be made, as shared/slurm/README.md describes.
func ensureMunge() error {
	if mungeWorks() {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: munged is not running and we are not root to start it", errSkip)
	}
	// Test packages run in parallel processes: on a machine where munged is
	// not running yet, two harnesses started it at once and the second
	// munged failed on the first one's socket lock. The lock makes the
	// second wait, then find munged working.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "heliostat-slurmtest-munge.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if mungeWorks() {
		return nil
	}
	if _, err := os.Stat("/etc/munge/munge.key"); err != nil {
		if out, err := exec.Command("mungekey", "-c").CombinedOutput(); err != nil {
			return fmt.Errorf("slurmtest: mungekey -c: %w: %s", err, out)
		}
	}
	if err := os.MkdirAll("/run/munge", 0o755); err != nil {
		return fmt.Errorf("slurmtest: %w", err)
	}
	if out, err := exec.Command("chown", "munge:munge", "/run/munge").CombinedOutput(); err != nil {
		return fmt.Errorf("slurmtest: chown /run/munge: %w: %s", err, out)
	}
	if out, err := exec.Command("su", "-s", "/bin/sh", "munge", "-c", "munged").CombinedOutput(); err != nil {
		return fmt.Errorf("slurmtest: start munged: %w: %s", err, out)
	}
	for i := 0; i < 50; i++ {
		if mungeWorks() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("slurmtest: munged started but `munge -n | unmunge` still fails")
}

// lockFile takes an exclusive flock on path, waiting for another process
// that holds it, and returns the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("slurmtest: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("slurmtest: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

func mungeWorks() bool {
	cred, err := exec.Command("munge", "-n").Output()
	if err != nil {
		return false
	}
	cmd := exec.Command("unmunge")
	cmd.Stdin = bytes.NewReader(cred)
	return cmd.Run() == nil
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
