// Package promtest runs Debian's Prometheus for tests: promtool, to check and
// unit-test rule and config files, and a prometheus server on a temporary
// directory that scrapes the test's targets and evaluates its rule files,
// queried through its HTTP API. It installs the prometheus package with
// apt-get when it is missing and the test runs as root; elsewhere the test
// is skipped, except under CI=true, where it fails.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/heliostat-dev/heliostat/internal/aptinstall"
)

// errSkip marks a machine that cannot run Prometheus: the test is skipped
// there unless CI=true.
var errSkip = errors.New("promtest: prometheus is not installed")

var installOnce struct {
	sync.Once
	err error
}

// binary returns the path of prometheus or promtool, installing Debian's
// prometheus package (which holds both) when it is missing.
func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	installOnce.Do(func() { installOnce.err = install() })
	if installOnce.err != nil {
		return "", installOnce.err
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not on PATH after installing the prometheus package", errSkip, name)
	}
	return p, nil
}

func install() error {
	if err := aptinstall.New().Install([]string{"--no-install-recommends"}, "prometheus"); err != nil {
		return fmt.Errorf("%w: %v", errSkip, err)
	}
	return nil
}

func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errSkip) && os.Getenv("CI") != "true" {
		t.Skipf("no Prometheus: %v", err)
	}
	t.Fatal(err)
}

// Promtool runs promtool with args in dir and returns its output; a non-zero
// exit is an error holding the output.
func Promtool(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	bin, err := binary("promtool")
	if err != nil {
		fail(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("promtool %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Job is a scrape job: its name and the host:port of its targets.
type Job struct {
	Name    string
	Targets []string
}

// Config is what the server scrapes and evaluates.
type Config struct {
	// Jobs are scraped over HTTP at /metrics.
	Jobs []Job
	// RuleFiles are loaded as rule_files (absolute, or relative to the
	// test's working directory).
	RuleFiles []string
	// Interval is the scrape and rule evaluation interval. Default 1s.
	Interval time.Duration
}

// Server is a running prometheus.
type Server struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:40123.
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Start starts a prometheus server for one test with cfg and stops it when
// the test ends; its log is printed when the test fails.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := start(t.TempDir(), cfg)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			b, _ := os.ReadFile(s.log)
			t.Logf("prometheus log:\n%s", aptinstall.Tail(b, 4000))
		}
	})
	return s
}

func start(dir string, cfg Config) (*Server, error) {
	bin, err := binary("prometheus")
	if err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	conf, err := configYAML(cfg)
	if err != nil {
		return nil, err
	}
	confFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confFile, conf, 0o644); err != nil {
		return nil, fmt.Errorf("promtest: write config: %w", err)
	}
	// The port picked free may be taken before prometheus binds it (another
	// test's server, or a connection's local port); it then exits at once
	// and a new port is picked.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(bin, dir, confFile, port)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 5 {
			return s, err
		}
	}
}

// errPortTaken marks a start that failed because the port was in use.
var errPortTaken = errors.New("promtest: port in use")

// launch runs prometheus on port and waits until it is ready.
func launch(bin, dir, confFile string, port int) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{URL: "http://" + addr, done: make(chan struct{}), log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(bin,
		"--config.file="+confFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("promtest: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.waitReady(30 * time.Second); err != nil {
		s.stop()
		b, _ := os.ReadFile(s.log)
		err = fmt.Errorf("%w\nprometheus log: %s", err, aptinstall.Tail(b, 2000))
		if bytes.Contains(b, []byte("address already in use")) {
			err = fmt.Errorf("%w (%w)", err, errPortTaken)
		}
		return nil, err
	}
	return s, nil
}

// configYAML is prometheus.yml for cfg.
func configYAML(cfg Config) ([]byte, error) {
	type staticConfig struct {
		Targets []string `yaml:"targets"`
	}
	type scrapeConfig struct {
		JobName       string         `yaml:"job_name"`
		StaticConfigs []staticConfig `yaml:"static_configs"`
	}
	var rules []string
	for _, f := range cfg.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, fmt.Errorf("promtest: rule file %s: %w", f, err)
		}
		rules = append(rules, abs)
	}
	c := struct {
		Global struct {
			ScrapeInterval     string `yaml:"scrape_interval"`
			ScrapeTimeout      string `yaml:"scrape_timeout"`
			EvaluationInterval string `yaml:"evaluation_interval"`
		} `yaml:"global"`
		RuleFiles     []string       `yaml:"rule_files,omitempty"`
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
	}{RuleFiles: rules}
	iv := cfg.Interval.String()
	c.Global.ScrapeInterval, c.Global.ScrapeTimeout, c.Global.EvaluationInterval = iv, iv, iv
	for _, j := range cfg.Jobs {
		c.ScrapeConfigs = append(c.ScrapeConfigs, scrapeConfig{JobName: j.Name, StaticConfigs: []staticConfig{{Targets: j.Targets}}})
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("promtest: config: %w", err)
	}
	return b, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("promtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return errors.New("promtest: prometheus exited while starting")
		default:
		}
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("promtest: prometheus not ready after %v (last: %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// apiError is an error the HTTP API answered, e.g. a PromQL parse error
// (Type "bad_data") or one of evaluation ("execution").
type apiError struct {
	Type, Msg string
}

func (e *apiError) Error() string { return e.Type + ": " + e.Msg }

// get calls the HTTP API at path with query and decodes its data into v.
func (s *Server) get(ctx context.Context, path string, query url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("promtest: %s: %w", path, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("promtest: %s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return &apiError{Type: body.ErrorType, Msg: body.Error}
	}
	if err := json.Unmarshal(body.Data, v); err != nil {
		return fmt.Errorf("promtest: %s: data: %w", path, err)
	}
	return nil
}

// Sample is one element of an instant query's result: a series' labels and
// value (a scalar result is one sample without labels).
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query evaluates expr at the current time. A PromQL error is returned as
// the server named it.
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, fmt.Errorf("promtest: vector: %w", err)
		}
		out := make([]Sample, 0, len(vec))
		for _, v := range vec {
			f, err := parseValue(v.Value[1])
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Labels: v.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var sc [2]any
		if err := json.Unmarshal(data.Result, &sc); err != nil {
			return nil, fmt.Errorf("promtest: scalar: %w", err)
		}
		f, err := parseValue(sc[1])
		if err != nil {
			return nil, err
		}
		return []Sample{{Value: f}}, nil
	default:
		return nil, fmt.Errorf("promtest: result type %q of %q: want an instant vector or a scalar", data.ResultType, expr)
	}
}

func parseValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("promtest: sample value %v is not a string", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("promtest: sample value: %w", err)
	}
	return f, nil
}

// Rule is a loaded alerting rule and its last evaluation.
type Rule struct {
	Group     string
	Name      string `json:"name"`
	Query     string `json:"query"`
	Health    string `json:"health"` // ok, err or unknown (not evaluated yet)
	LastError string `json:"lastError"`
	State     string `json:"state"` // inactive, pending or firing
	// LastEvaluation is when the rule was last evaluated (zero before).
	LastEvaluation time.Time `json:"lastEvaluation"`
	Alerts         []struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"` // rendered
		State       string            `json:"state"`
	} `json:"alerts"`
}

// AlertingRules returns the alerting rules the server loaded, in file
// order.
func (s *Server) AlertingRules(ctx context.Context) ([]Rule, error) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []Rule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// Target is a scrape target's state.
type Target struct {
	Job       string
	Instance  string
	Health    string `json:"health"` // up, down or unknown (not scraped yet)
	LastError string `json:"lastError"`
	// LastScrape is when the target was last scraped (zero before).
	LastScrape time.Time `json:"lastScrape"`
}

// Targets returns the active targets.
func (s *Server) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		Active []struct {
			Labels map[string]string `json:"labels"`
			Target
		} `json:"activeTargets"`
	}
	if err := s.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	out := make([]Target, 0, len(data.Active))
	for _, a := range data.Active {
		tg := a.Target
		tg.Job, tg.Instance = a.Labels["job"], a.Labels["instance"]
		out = append(out, tg)
	}
	return out, nil
}

// ReadScrapeJobs reads the static scrape jobs of a Prometheus configuration
// file (deploy/prometheus/scrape.yaml): each job's name and targets.
func ReadScrapeJobs(path string) ([]Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("promtest: %w", err)
	}
	var f struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("promtest: %s: %w", path, err)
	}
	jobs := make([]Job, 0, len(f.ScrapeConfigs))
	for _, sc := range f.ScrapeConfigs {
		j := Job{Name: sc.JobName}
		for _, s := range sc.StaticConfigs {
			j.Targets = append(j.Targets, s.Targets...)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
