package slurmadapter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestAdminLevels pins what docs/OPERATIONS.md tells an admin to grant the
// actuator's user: the adapter's commands run as an unprivileged user (as
// the unit runs them, as `heliostat`; here `nobody`) on a cluster with
// accounting. With AdminLevel=Operator it sets another user's job priority
// but slurmctld refuses it a node's power-down; with AdminLevel=Admin it may
// do both.
func TestAdminLevels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd and MariaDB")
	}
	const actor, owner = "nobody", "daemon" // Debian's own unprivileged users
	for _, u := range []string{actor, owner} {
		if _, err := exec.Command("id", "-u", u).Output(); err != nil {
			t.Fatalf("no user %s on this host: %v", u, err)
		}
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		t.Fatalf("runuser (util-linux) is needed to run Slurm's commands as %s: %v", actor, err)
	}
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := c.Run(ctx, name, args...)
		if err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	run("sacctmgr", "-i", "add", "account", "research")
	run("sacctmgr", "-i", "add", "user", owner, actor, "account=research")
	setLevel := func(level string) {
		t.Helper()
		run("sacctmgr", "-i", "modify", "user", actor, "set", "adminlevel="+level)
		// slurmctld learns it from slurmdbd a moment later.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out := run("scontrol", "show", "assoc_mgr", "users="+actor, "flags=users")
			if strings.Contains(out, "AdminLevel="+level) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("slurmctld does not show %s with AdminLevel=%s after 30 s:\n%s", actor, level, out)
			}
		}
	}

	// Slurm's commands, run as the actor.
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapCommands(t, bin, func(_, real string) string {
		return fmt.Sprintf("exec %s -u %s -- %s \"$@\"", runuser, actor, real)
	}, "squeue", "sinfo", "scontrol")
	s, err := New(Config{Conf: c.Conf(), BinDir: bin}, c.Env(), nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Another user's job, pending until its begin time.
	job, err := c.Submit(ctx, "--uid="+owner, "--chdir=/tmp", "-o", "/dev/null", "--begin=now+1hour", "--gres=gpu:1", "--wrap", "sleep 5")
	if err != nil {
		t.Fatal(err)
	}
	priority := func() string {
		t.Helper()
		return strings.TrimSpace(run("squeue", "-h", "-j", job, "-o", "%Q"))
	}
	node := slurmtest.Nodes[len(slurmtest.Nodes)-1]

	setLevel("Operator")
	if err := s.SetPriority(ctx, job, 1234); err != nil {
		t.Errorf("Operator: set priority of %s's job: %v", owner, err)
	}
	if p := priority(); p != "1234" {
		t.Errorf("Operator: priority of %s's job = %s; want 1234", owner, p)
	}
	err = s.PowerDown(ctx, node)
	if err == nil || !strings.Contains(err.Error(), "Invalid user id") {
		t.Errorf("Operator: power down %s = %v; want slurmctld's refusal (Invalid user id)", node, err)
	}

	setLevel("Admin")
	if err := s.SetPriority(ctx, job, 2345); err != nil {
		t.Errorf("Admin: set priority: %v", err)
	}
	if p := priority(); p != "2345" {
		t.Errorf("Admin: priority = %s; want 2345", p)
	}
	// The node's State= field, e.g. IDLE or IDLE+POWERING_DOWN.
	nodeState := func() string {
		t.Helper()
		out := run("scontrol", "show", "node", node)
		if m := regexp.MustCompile(`\bState=(\S+)`).FindStringSubmatch(out); m != nil {
			return m[1]
		}
		t.Fatalf("no State= in scontrol show node %s:\n%s", node, out)
		return ""
	}
	if st := nodeState(); strings.Contains(st, "POWER") {
		t.Fatalf("premise: %s is %s before any power action", node, st)
	}
	if err := s.PowerDown(ctx, node); err != nil {
		t.Errorf("Admin: power down %s: %v", node, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st := nodeState()
		if strings.Contains(st, "POWER") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Admin: %s is %s 30 s after its power-down; want POWERING_DOWN or POWERED_DOWN", node, st)
		}
	}
	if err := s.PowerUp(ctx, node); err != nil {
		t.Errorf("Admin: power up %s: %v", node, err)
	}
}
