package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/internal/testpki"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestActuatorCommand runs `heliostat actuator` against a real Slurm and
// ClickHouse, dry run: the API ranks the queue, the pass trigger needs the
// token from the environment, every decision is in /v1/actions as skipped
// and on the heliostat.actions topic, Slurm's priorities stay as they were,
// every time the API answers with is UTC to the second (whatever the host's
// zone: run with TZ=Asia/Kolkata) and none is the zero time (year 1) of a
// time not known, and the recorded demand is saved.
func TestActuatorCommand(t *testing.T) {
	schematest.SkipOnCHDB(t, "a Slurm cluster (the actuator's queries run on chDB in actuator/loop, api and audit)")
	c := slurmtest.Start(t)
	cfg, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.SeedTopics(1, schemas.TopicActions))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	filler, err := c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, filler); err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, limit := range []string{"60", "5"} {
		id, err := c.Submit(ctx, "-N1", "--gres=gpu:8", "-t", limit, "--wrap", "true")
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, id)
	}
	prioBefore, _ := c.Run(ctx, "squeue", "-h", "-t", "PD", "-o", "%i %Q")

	addr := freeAddr(t)
	const tok = "actuator-test-token-0123456789"
	pki := testpki.New(t)
	env := map[string]string{"HELIOSTAT_ACTUATOR_TOKEN": tok}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	stderr := &lockedWriter{w: &strings.Builder{}}
	go func() {
		done <- run(runCtx, []string{"actuator", "--clickhouse.addr", cfg.Addr, "--clickhouse.database", cfg.Database,
			"--slurm.conf", c.Conf(), "--actuator.listen-address", addr, "--actuator.partitions", "batch", "--actuator.nodes", "gpu*",
			"--actuator.predictor", "none", "--actuator.interval", "1s", "--actuator.cluster", "t", "--log.level", "warn",
			"--kafka.brokers", broker, "--spool.dir", filepath.Join(t.TempDir(), "spool"),
			"--actuator.tls.cert", pki.CertFile, "--actuator.tls.key", pki.KeyFile},
			func(k string) string { return env[k] }, io.Discard, stderr)
	}()
	// The API is served over HTTPS; clients trust the test CA.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool}}}
	get := func(method, path, auth string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, "https://"+addr+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for {
		if code, _ := get("GET", "/readyz", ""); code == 200 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("actuator exited: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("actuator not ready\n%s", stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Plain HTTP gets no answer from the HTTPS listener.
	if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the API answered plain HTTP with 200; want HTTPS only")
		}
	}
	code, body := get("GET", "/v1/queue", "")
	var q struct {
		Apply bool `json:"apply"`
		Jobs  []struct {
			JobID  string `json:"job_id"`
			Source string `json:"source"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &q); err != nil || code != 200 || q.Apply || len(q.Jobs) != 2 || q.Jobs[0].JobID != pending[1] || q.Jobs[0].Source != "time_limit" {
		t.Errorf("/v1/queue = %d %s; want the 5-minute job %s first, dry run", code, body, pending[1])
	}
	if code, _ := get("POST", "/v1/passes", ""); code != http.StatusUnauthorized {
		t.Errorf("pass without a token: %d; want 401", code)
	}
	code, passBody := get("POST", "/v1/passes", tok)
	if code != 200 {
		t.Errorf("pass with the token: %d %s", code, passBody)
	}
	answers := map[string][]byte{"POST /v1/passes": passBody}
	for _, p := range []string{"/v1/queue", "/v1/power-plan", "/v1/actions"} {
		_, answers["GET "+p] = get("GET", p, "")
	}
	for what, b := range answers {
		if bad := badTimes(t, b); len(bad) > 0 {
			t.Errorf("%s: times %q; want UTC to the second, none zero (TZ=%s): %s", what, bad, time.Local, b)
		}
	}
	code, body = get("GET", "/v1/actions?kind=set_priority", "")
	var a struct {
		Actions []struct {
			Target  string `json:"target"`
			Outcome string `json:"outcome"`
			DryRun  bool   `json:"dry_run"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(body, &a); err != nil || code != 200 || len(a.Actions) != 2 {
		t.Fatalf("/v1/actions = %d %s; want the two priorities, once each", code, body)
	}
	for _, r := range a.Actions {
		if r.Outcome != "skipped" || !r.DryRun {
			t.Errorf("action %+v; want skipped in a dry run", r)
		}
	}
	// The same decisions, with their outcomes, on heliostat.actions.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: schemas.TopicActions, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	published := map[string]string{}
	for len(published) < 2 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s: %v (have %v)", schemas.TopicActions, err, published)
		}
		var b schemas.ActionBatch
		if err := schemas.DecodeActionBatch(m.Value, &b); err != nil || b.Cluster != "t" || string(m.Key) != "t" {
			t.Fatalf("message %q: %+v, %v", m.Key, b, err)
		}
		for _, act := range b.Actions {
			if act.Kind == "set_priority" && act.DryRun {
				published[act.Target] = act.Outcome
			}
		}
	}
	for _, id := range pending {
		if published[id] != "skipped" {
			t.Errorf("published priority actions %v; want %s skipped", published, id)
		}
	}
	if after, _ := c.Run(ctx, "squeue", "-h", "-t", "PD", "-o", "%i %Q"); after != prioBefore {
		t.Errorf("dry run changed Slurm's priorities:\n%s\nto\n%s", prioBefore, after)
	}
	if code, body := get("GET", "/metrics", ""); code != 200 || !strings.Contains(string(body), "heliostat_actuator_actions_total") {
		t.Errorf("/metrics = %d without heliostat_actuator_actions_total", code)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("actuator: %v\n%s", err, stderr.String())
	}
	// The demand its forecaster recorded is saved for the next start.
	if n := schematest.Count(t, conn, cfg.Database+".actuator_demand WHERE cluster = 't' AND partition_name = 'batch'"); n == 0 {
		t.Error("no demand of partition batch saved in actuator_demand")
	}
}

// badTimes returns the RFC 3339 times in the JSON b that are not UTC ("Z"),
// not whole seconds, or the zero time.
func badTimes(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Errorf("answer is not JSON: %v: %s", err, b)
		return nil
	}
	var bad []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			if at, err := time.Parse(time.RFC3339Nano, v); err == nil && (!strings.HasSuffix(v, "Z") || at.Nanosecond() != 0 || at.IsZero()) {
				bad = append(bad, v)
			}
		}
	}
	walk(v)
	return bad
}

// lockedWriter serializes writes from the command's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// String returns what was written.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*strings.Builder).String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
