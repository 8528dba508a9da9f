package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/internal/promtest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// deployDir holds the systemd units and the Prometheus scrape jobs that
// OPERATIONS.md's "Deploying" section describes.
const deployDir = "../../deploy"

// unitFile is a systemd unit file: the values of each key, by section.
type unitFile map[string]map[string][]string

// get returns the last value of key in section ("" when absent), as systemd
// reads a key given twice.
func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseUnit reads a unit file as systemd does: sections, Key=Value lines,
// # and ; comments, and lines continued with a trailing backslash.
func parseUnit(path string) (unitFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := unitFile{}
	section, cont := "", ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cont == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("%s:%d: %q is neither a section nor Key=Value", path, n, line)
		}
		k = strings.TrimSpace(k)
		u[section][k] = append(u[section][k], strings.TrimSpace(v))
	}
	if cont != "" {
		return nil, fmt.Errorf("%s: ends in a continued line", path)
	}
	return u, sc.Err()
}

// parseEnvFile reads an EnvironmentFile= of KEY=VALUE lines and comments.
func parseEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(k) {
			return nil, fmt.Errorf("%s:%d: %q is not KEY=VALUE", path, n+1, line)
		}
		env[k] = v
	}
	return env, nil
}

var unitVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// execArgs returns the argument list systemd would run for ExecStart:
// split on white space (the units quote nothing), with ${VAR} replaced from
// env and the specifiers %S (the state directories' root), %d (the
// credentials directory) and %% replaced.
func execArgs(line string, env map[string]string, stateRoot, credDir string) ([]string, error) {
	if strings.ContainsAny(line, `"'`) {
		return nil, fmt.Errorf("ExecStart %q quotes; this test splits on white space only", line)
	}
	var args []string
	for _, w := range strings.Fields(line) {
		var bad error
		w = unitVar.ReplaceAllStringFunc(w, func(m string) string {
			k := unitVar.FindStringSubmatch(m)[1]
			v, ok := env[k]
			if !ok && bad == nil {
				bad = fmt.Errorf("ExecStart uses ${%s}, which heliostat.env does not set", k)
			}
			return v
		})
		w = strings.NewReplacer("%S", stateRoot, "%d", credDir, "%%", "%").Replace(w)
		if bad != nil {
			return nil, bad
		}
		if strings.Contains(w, "%") || strings.Contains(w, "$") {
			return nil, fmt.Errorf("ExecStart word %q holds a specifier or variable this test does not know", w)
		}
		args = append(args, w)
	}
	return args, nil
}

// flagValue returns the value of --name=value (or --name value) in args,
// the last one as the flag package keeps it.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"+name+"="):
			v = strings.TrimPrefix(a, "--"+name+"=")
		case a == "--"+name && i+1 < len(args):
			v = args[i+1]
		}
	}
	return v
}

// deployedUnits are the units deploy/systemd ships, with the listen flag of
// each one's /metrics.
var deployedUnits = map[string]string{
	"heliostat-collector":    "web.listen-address",
	"heliostat-slurm-source": "web.listen-address",
	"heliostat-ingest":       "web.listen-address",
	"heliostat-analytics":    "web.listen-address",
	"heliostat-predictor":    "web.listen-address",
	"heliostat-actuator":     "actuator.listen-address",
}

type deployedUnit struct {
	name string
	unit unitFile
	args []string // ExecStart without the binary, as systemd would run it
}

// loadUnits reads and checks deploy/systemd: the units every deployment
// needs, each run as the heliostat user with the shared environment file,
// restarted on failure, its state in its own StateDirectory, and its
// metrics port the one deploy/prometheus/scrape.yaml scrapes.
func loadUnits(t *testing.T, env map[string]string, stateRoot, credDir string) map[string]deployedUnit {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir, "systemd", "*.service"))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := promtest.ReadScrapeJobs(filepath.Join(deployDir, "prometheus", "scrape.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string][]string{} // scrape job → target ports
	for _, j := range jobs {
		for _, target := range j.Targets {
			_, port, err := net.SplitHostPort(target)
			if err != nil {
				t.Errorf("scrape.yaml: job %s: target %q: %v", j.Name, target, err)
			}
			ports[j.Name] = append(ports[j.Name], port)
		}
	}
	units := map[string]deployedUnit{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".service")
		listenFlag, known := deployedUnits[name]
		if !known {
			t.Errorf("%s: a unit this test does not run; add it to deployedUnits", p)
			continue
		}
		u, err := parseUnit(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range [][3]string{
			{"Service", "User", "heliostat"},
			{"Service", "EnvironmentFile", "/etc/heliostat/heliostat.env"},
			{"Service", "Restart", "on-failure"},
			{"Service", "NoNewPrivileges", "yes"},
			{"Service", "ProtectSystem", "strict"},
			{"Install", "WantedBy", "multi-user.target"},
		} {
			if got := u.get(want[0], want[1]); got != want[2] {
				t.Errorf("%s: [%s] %s=%q; want %q", name, want[0], want[1], got, want[2])
			}
		}
		if d, err := time.ParseDuration(u.get("Service", "TimeoutStopSec")); err != nil || d < 30*time.Second {
			t.Errorf("%s: TimeoutStopSec=%q; want at least 30s (the parts' graceful stop)", name, u.get("Service", "TimeoutStopSec"))
		}
		if len(u["Service"]["ExecStart"]) != 1 {
			t.Fatalf("%s: want one ExecStart, got %d", name, len(u["Service"]["ExecStart"]))
		}
		args, err := execArgs(u.get("Service", "ExecStart"), env, stateRoot, credDir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if args[0] != "/usr/local/bin/heliostat" {
			t.Errorf("%s: runs %s; want /usr/local/bin/heliostat", name, args[0])
		}
		// ProtectSystem=strict leaves only the StateDirectory writable:
		// every state path must be under it.
		state := u.get("Service", "StateDirectory")
		for _, a := range args {
			if _, path, ok := strings.Cut(a, "="); ok && strings.HasPrefix(path, stateRoot) &&
				!strings.HasPrefix(path, filepath.Join(stateRoot, state)+"/") {
				t.Errorf("%s: %s writes outside StateDirectory=%s", name, a, state)
			}
		}
		_, port, err := net.SplitHostPort(flagValue(args, listenFlag))
		if err != nil {
			t.Errorf("%s: --%s: %v", name, listenFlag, err)
		}
		if ps := ports[name]; len(ps) == 0 || slices.ContainsFunc(ps, func(p string) bool { return p != port }) {
			t.Errorf("%s listens on port %s; scrape.yaml's job %s scrapes %v", name, port, name, ps)
		}
		delete(ports, name)
		if state != "" {
			// systemd creates it, owned by User=, before ExecStart.
			if err := os.MkdirAll(filepath.Join(stateRoot, state), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		units[name] = deployedUnit{name: name, unit: u, args: args[1:]}
	}
	for job := range ports {
		t.Errorf("scrape.yaml: job %s has no unit in deploy/systemd", job)
	}
	for name := range deployedUnits {
		if _, ok := units[name]; !ok {
			t.Errorf("deploy/systemd/%s.service is missing", name)
		}
	}
	return units
}

// TestSystemdUnits checks deploy/systemd with systemd-analyze verify, then
// runs every unit's ExecStart, as systemd would expand it from heliostat.env,
// against a real ClickHouse, Kafka-protocol broker and Slurm: each becomes
// ready, a Slurm job and GPU samples reach ClickHouse under the cluster name
// of heliostat.env, and each stops cleanly on the signal systemd sends. The
// only changes to the units' arguments are the test's addresses, a synthetic
// GPU source in place of NVML (no GPU here), and the test database; they are
// appended, so the units' own flags are parsed as written.
func TestSystemdUnits(t *testing.T) {
	schematest.SkipOnCHDB(t, "every part started from its unit, with a Slurm cluster")
	if testing.Short() {
		t.Skip("starts every part and a Slurm cluster")
	}
	env, err := parseEnvFile(filepath.Join(deployDir, "systemd", "heliostat.env"))
	if err != nil {
		t.Fatal(err)
	}
	stateRoot, credDir := t.TempDir(), t.TempDir()
	units := loadUnits(t, env, stateRoot, credDir)
	if t.Failed() {
		t.FailNow()
	}

	// systemd's own check of the files: unknown keys, bad values and a
	// missing binary are printed (and not all of them fail its exit code),
	// so any output fails the test. The binary path is pointed at this test
	// binary, which exists.
	verifyDir := t.TempDir()
	var files []string
	for name := range units {
		b, err := os.ReadFile(filepath.Join(deployDir, "systemd", name+".service"))
		if err != nil {
			t.Fatal(err)
		}
		self, _ := filepath.Abs(os.Args[0])
		f := filepath.Join(verifyDir, name+".service")
		if err := os.WriteFile(f, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/heliostat", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, files...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// With accounting, as heliostat.env asks of the Slurm source.
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true})
	cfg, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.SeedTopics(1, schemas.TopicActions))
	env["HELIOSTAT_KAFKA_BROKERS"] = broker
	env["HELIOSTAT_CLICKHOUSE_ADDR"] = cfg.Addr
	env["HELIOSTAT_SLURM_JOBCOMP_LOG"] = c.JobCompLog()
	cluster := env["HELIOSTAT_CLUSTER"]
	// Expanded again with the test's addresses.
	units = loadUnits(t, env, stateRoot, credDir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	job, err := c.Submit(ctx, "-N1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}

	type started struct {
		name, base string
		stop       context.CancelFunc
		done       chan error
		log        *lockedWriter
	}
	start := func(name string) *started {
		u := units[name]
		addr := freeAddr(t)
		args := append(slices.Clone(u.args), "--"+deployedUnits[name]+"="+addr, "--log.level=warn")
		switch name {
		case "heliostat-collector":
			args = append(args, "--source=synthetic", "--synthetic.gpus=2")
		case "heliostat-slurm-source":
			args = append(args, "--slurm.conf="+c.Conf())
		case "heliostat-actuator":
			// The partition allowlist the unit's comment says to add,
			// still without --actuator.apply.
			args = append(args, "--slurm.conf="+c.Conf(), "--actuator.partitions=batch")
		}
		if name != "heliostat-collector" && name != "heliostat-slurm-source" {
			args = append(args, "--clickhouse.database="+cfg.Database)
		}
		runCtx, stop := context.WithCancel(ctx)
		s := &started{name: name, base: "http://" + addr, stop: stop, done: make(chan error, 1), log: &lockedWriter{w: &strings.Builder{}}}
		go func() { s.done <- run(runCtx, args, func(k string) string { return env[k] }, io.Discard, s.log) }()
		return s
	}
	// stopUnit cancels a part as systemd's SIGTERM does and waits, within
	// the unit's TimeoutStopSec, for it to return without an error.
	stopUnit := func(s *started) {
		t.Helper()
		s.stop()
		limit, _ := time.ParseDuration(units[s.name].unit.get("Service", "TimeoutStopSec"))
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("%s stopped with: %v\n%s", s.name, err, s.log.String())
			}
		case <-time.After(limit):
			t.Errorf("%s did not stop within TimeoutStopSec=%v\n%s", s.name, limit, s.log.String())
		}
	}
	ready := func(s *started) {
		t.Helper()
		if s.name == "heliostat-actuator" {
			deadline := time.Now().Add(60 * time.Second)
			for {
				resp, err := http.Get(s.base + "/readyz")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not ready after 60 s\n%s", s.name, s.log.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		waitProbe(t, http.DefaultClient, s.base, http.StatusOK, "ready")
	}

	// The predictor and the actuator conflict (the actuator predicts too):
	// the predictor runs first, alone, as on a site without an actuator.
	var running []*started
	for _, name := range []string{"heliostat-ingest", "heliostat-collector", "heliostat-slurm-source", "heliostat-analytics", "heliostat-predictor"} {
		running = append(running, start(name))
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		jobs := schematest.Count(t, conn, cfg.Database+".jobs FINAL WHERE cluster = '"+cluster+"' AND job_id = '"+job+"'")
		samples := schematest.Count(t, conn, cfg.Database+".gpu_samples WHERE cluster = '"+cluster+"'")
		if jobs == 1 && samples > 0 {
			t.Logf("Slurm job %s and %d GPU samples of cluster %s in ClickHouse", job, samples, cluster)
			break
		}
		for _, s := range running {
			select {
			case err := <-s.done:
				t.Fatalf("%s exited: %v\n%s", s.name, err, s.log.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, s := range running {
				fmt.Fprintf(&logs, "%s:\n%s\n", s.name, s.log.String())
			}
			t.Fatalf("after 90 s: job %s %d times, %d GPU samples of cluster %s\n%s", job, jobs, samples, cluster, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range running {
		ready(s)
	}
	stopUnit(running[len(running)-1]) // the predictor
	running = running[:len(running)-1]
	// A job that stays pending in the allowlisted partition, so that the
	// actuator decides a priority (and skips it: a dry run).
	if _, err := c.Submit(ctx, "--begin=now+3600", "--wrap", "sleep 1"); err != nil {
		t.Fatal(err)
	}
	act := start("heliostat-actuator")
	ready(act)
	// It logs each action to heliostat.actions on the brokers of
	// heliostat.env, whether applied or, in this dry run, skipped.
	sent := `heliostat_publisher_messages_total{outcome="sent",topic="` + schemas.TopicActions + `"}`
	for deadline := time.Now().Add(60 * time.Second); ; {
		v, err := metricValue(act.base+"/metrics", sent)
		if err == nil && v > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heliostat-actuator: %s = %v (%v) after 60 s; want its actions published to $HELIOSTAT_KAFKA_BROKERS\n%s", sent, v, err, act.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The unit as shipped is a dry run: nothing reaches Slurm until an
	// operator adds --actuator.apply.
	resp, err := http.Get(act.base + "/v1/queue")
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Apply *bool `json:"apply"`
	}
	err = json.NewDecoder(resp.Body).Decode(&q)
	resp.Body.Close()
	if err != nil || q.Apply == nil || *q.Apply {
		t.Errorf("heliostat-actuator's /v1/queue: apply = %v (%v); want false, a dry run", q.Apply, err)
	}
	running = append(running, act)
	for i := len(running) - 1; i >= 0; i-- {
		stopUnit(running[i])
	}
}

// metricValue returns the value of series (its name and labels, sorted, as
// the text exposition writes them) at the metrics URL.
func metricValue(url, series string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no series %s", series)
}

// shippedPath matches the paths of the shipped units that make install
// replaces with PREFIX's and SYSCONFDIR's.
var shippedPath = regexp.MustCompile(`(^|[\s=:])(/usr/local/bin/|/etc/heliostat/)`)

// TestMakeInstall runs make install as an operator would (the paths under a
// temporary directory, so that they exist as the units name them): the
// binary stamped with VERSION, every unit pointing at it and at the
// installed heliostat.env and passing systemd-analyze verify, the alert
// rules, scrape jobs and dashboards beside them; a second install keeps an
// edited heliostat.env; make uninstall removes the rest.
func TestMakeInstall(t *testing.T) {
	skipInCHDBPass(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	prefix, etc := filepath.Join(dir, "usr"), filepath.Join(dir, "etc")
	vars := []string{"PREFIX=" + prefix, "SYSCONFDIR=" + etc, "BIN=" + filepath.Join(dir, "build", "heliostat"), "VERSION=v9.9.9-test"}
	make := func(target string) string {
		t.Helper()
		out, err := exec.Command("make", append([]string{"-C", "../..", target}, vars...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	make("install")

	bin := filepath.Join(prefix, "bin", "heliostat")
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "v9.9.9-test") {
		t.Errorf("%s version: %v: %q; want v9.9.9-test", bin, err, out)
	}
	envFile := filepath.Join(etc, "heliostat", "heliostat.env")
	units, err := filepath.Glob(filepath.Join(deployDir, "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in deploy/systemd: %v", err)
	}
	var installed []string
	for _, u := range units {
		f := filepath.Join(prefix, "lib", "systemd", "system", filepath.Base(u))
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("unit %s not installed: %v", filepath.Base(u), err)
			continue
		}
		installed = append(installed, f)
		for _, want := range []string{"ExecStart=" + bin + " ", "EnvironmentFile=" + envFile + "\n"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: no %q", f, want)
			}
		}
		if m := shippedPath.FindString(string(b)); m != "" {
			t.Errorf("%s still names %q", f, m)
		}
	}
	if out, err := exec.Command("systemd-analyze", append([]string{"verify"}, installed...)...).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify of the installed units: %v\n%s", err, out)
	}
	share := filepath.Join(prefix, "share", "heliostat")
	for _, f := range []string{"prometheus/alerts.yaml", "prometheus/scrape.yaml", "grafana/pipeline.json", "grafana/provisioning/dashboards.yaml"} {
		if _, err := os.Stat(filepath.Join(share, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}

	// An operator's heliostat.env survives the next release's install.
	edited := []byte("HELIOSTAT_CLUSTER=edited\n")
	if err := os.WriteFile(envFile, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := make("install"); !strings.Contains(out, "kept "+envFile) {
		t.Errorf("second make install does not say it kept %s:\n%s", envFile, out)
	}
	if b, _ := os.ReadFile(envFile); !bytes.Equal(b, edited) {
		t.Errorf("make install replaced the edited heliostat.env with %q", b)
	}

	make("uninstall")
	for _, f := range append([]string{bin, share}, installed...) {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("make uninstall left %s (%v)", f, err)
		}
	}
	if _, err := os.Stat(envFile); err != nil {
		t.Errorf("make uninstall removed heliostat.env: %v", err)
	}
}
