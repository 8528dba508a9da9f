package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestStartBeforeClickHouse starts the long-running parts that need
// ClickHouse before there is one, as after a site-wide power-on: each stays
// up, serves /metrics with heliostat_ready 0 and a probe naming the
// ClickHouse it waits for; one stopped while waiting exits cleanly. Then a
// real ClickHouse starts on the awaited port, and each part migrates the
// schema and runs.
func TestStartBeforeClickHouse(t *testing.T) {
	schematest.SkipOnCHDB(t, "a ClickHouse server started after the parts")
	if testing.Short() {
		t.Skip("starts a ClickHouse of its own")
	}
	port, err := chserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	chAddr := "127.0.0.1:" + strconv.Itoa(port)
	_, broker := schematest.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	type part struct {
		name, base, probe string
		stop              context.CancelFunc
		done              chan error
		log               *lockedWriter
	}
	start := func(name, probe string, args ...string) *part {
		addr := freeAddr(t)
		listen := "--web.listen-address="
		if name == "actuator" {
			listen = "--actuator.listen-address="
		}
		args = append(args, listen+addr, "--clickhouse.addr="+chAddr, "--clickhouse.database=waited", "--log.level=info")
		if name == "ingest" || name == "actuator" {
			args = append(args, "--kafka.brokers="+broker)
		}
		pctx, stop := context.WithCancel(ctx)
		p := &part{name: name, base: "http://" + addr, probe: probe, stop: stop, done: make(chan error, 1), log: &lockedWriter{w: &strings.Builder{}}}
		go func() { p.done <- run(pctx, append(strings.Fields(name), args...), noEnv, io.Discard, p.log) }()
		return p
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// until polls f for up to a minute; f returns what it saw, or "" when done.
	until := func(p *part, what string, f func() string) {
		t.Helper()
		var last string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if last = f(); last == "" {
				return
			}
			select {
			case err := <-p.done:
				t.Fatalf("%s exited: %v\n%s", p.name, err, p.log.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s: still %s after a minute\n%s", p.name, what, last, p.log.String())
			}
		}
	}
	stopPart := func(p *part) {
		t.Helper()
		p.stop()
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("%s stopped with %v\n%s", p.name, err, p.log.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30 s of its signal\n%s", p.name, p.log.String())
		}
	}

	parts := []*part{
		start("ingest", "/-/ready"),
		start("analytics", "/-/ready"),
		start("predictor run", "/-/ready"),
		// No Slurm here: the actuator runs, but its passes fail.
		start("actuator", "/readyz", "--actuator.predictor=none", "--spool.dir="+t.TempDir()),
		start("predictor run", "/-/ready"), // stopped while it waits
	}
	waiting := "waiting for ClickHouse at " + chAddr
	const waitingMetric = `heliostat_start_waiting{dependency="clickhouse"}` // HeliostatWaitingForClickHouse
	for _, p := range parts {
		until(p, "probe while ClickHouse is down", func() string {
			code, body := get(p.base + p.probe)
			// Three attempts: it retries, and does not give up.
			if code != http.StatusServiceUnavailable || !strings.Contains(body, waiting) || !strings.Contains(body, "connection refused") ||
				!strings.Contains(body, "(attempt 3)") {
				return strconv.Itoa(code) + " " + body
			}
			_, m := get(p.base + "/metrics")
			for _, want := range []string{"\nheliostat_ready 0\n", waitingMetric + " 1\n"} {
				if !strings.Contains(m, want) {
					return "/metrics without " + strings.TrimSpace(want)
				}
			}
			return ""
		})
	}
	if !strings.Contains(parts[0].log.String(), "ClickHouse not usable at start-up; waiting for it") {
		t.Errorf("ingest's log does not say it waits for ClickHouse:\n%s", parts[0].log.String())
	}
	stopPart(parts[4])
	parts = parts[:4]

	srv, err := chserver.Start(ctx, chserver.Config{Dir: t.TempDir(), Install: true, TCPPort: port}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start ClickHouse: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	for _, p := range parts[:3] {
		until(p, "ready once ClickHouse is up", func() string {
			if code, body := get(p.base + p.probe); code != http.StatusOK {
				return strconv.Itoa(code) + " " + body
			}
			return ""
		})
	}
	act := parts[3]
	until(act, "the API once ClickHouse is up", func() string {
		// Running, and its first pass failed for want of Slurm: the probe
		// says so rather than only that there was no pass yet.
		if code, body := get(act.base + act.probe); code != http.StatusServiceUnavailable || strings.Contains(body, "starting") ||
			!strings.Contains(body, "read scheduler") {
			return strconv.Itoa(code) + " " + body
		}
		if code, body := get(act.base + "/v1/actions"); code != http.StatusOK {
			return "/v1/actions: " + strconv.Itoa(code) + " " + body
		}
		return ""
	})
	for _, p := range parts {
		if !strings.Contains(p.log.String(), "ClickHouse reached") {
			t.Errorf("%s's log does not say when ClickHouse was reached:\n%s", p.name, p.log.String())
		}
		if _, m := get(p.base + "/metrics"); !strings.Contains(m, "\n"+waitingMetric+" 0\n") {
			t.Errorf("%s: /metrics without %s 0 once ClickHouse is reached", p.name, waitingMetric)
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		stopPart(parts[i])
	}
}
