package collector

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/schemas"
)

const (
	testCluster = "test-cluster"
	testHost    = "node-7"
	testGPUs    = 4
)

// fakeSource reports gpus GPUs; tick numbers start at 1. bad, if set, says
// how tick n goes wrong: an error after appending its samples, or an
// out-of-range value.
type fakeSource struct {
	gpus int
	bad  func(tick int) (fail, outOfRange bool)

	mu    sync.Mutex
	ticks int
}

func (s *fakeSource) Name() string { return "fake" }

func (s *fakeSource) Collect(_ context.Context, now time.Time, b *schemas.SampleBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	var fail, outOfRange bool
	if s.bad != nil {
		fail, outOfRange = s.bad(s.ticks)
	}
	for i := range s.gpus {
		idx := b.AddGPU(schemas.GPU{
			Index: uint32(i), UUID: fmt.Sprintf("GPU-%04d", i), Minor: int32(i),
			Model: "fake", GIID: -1, CIID: -1,
		})
		smp := schemas.Sample{TSMillis: now.UnixMilli(), GPU: idx}
		smp.Set(schemas.GPUUtil, uint64(s.ticks%100))
		if outOfRange {
			smp.Set(schemas.GPUUtil, 101)
		}
		b.Samples = append(b.Samples, smp)
	}
	if fail {
		return fmt.Errorf("fake: tick %d failed", s.ticks)
	}
	return nil
}

// eventSource is a fakeSource that also watches events with watch.
type eventSource struct {
	*fakeSource
	watch func(ctx context.Context, emit func(schemas.GPUEvent)) error
}

func (s *eventSource) WatchEvents(ctx context.Context, emit func(schemas.GPUEvent)) error {
	return s.watch(ctx, emit)
}

// message is one call of recorder.Publish.
type message struct {
	topic, key string
	value      []byte
	ctxErr     error // of the ctx Publish got
}

// recorder is a Publisher that records what it is given. fail, if set,
// makes call n (from 1) fail.
type recorder struct {
	fail func(n int) bool

	mu    sync.Mutex
	calls int
	msgs  []message
}

var errSpoolFull = errors.New("spool full")

func (r *recorder) Publish(ctx context.Context, topic string, key, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil && r.fail(r.calls) {
		return errSpoolFull
	}
	// The Collector reuses its buffers: copy, as publish.Publisher does.
	r.msgs = append(r.msgs, message{topic, string(key), bytes.Clone(value), ctx.Err()})
	return nil
}

func (r *recorder) messages(topic string) []message {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []message
	for _, m := range r.msgs {
		if m.topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// sampleBatches decodes the sample messages, checking their key and stamps.
func (r *recorder) sampleBatches(t *testing.T) []schemas.SampleBatch {
	t.Helper()
	var out []schemas.SampleBatch
	for i, m := range r.messages(schemas.TopicGPUSamples) {
		var b schemas.SampleBatch
		if err := schemas.DecodeSampleBatch(m.value, &b); err != nil {
			t.Fatalf("DecodeSampleBatch(message %d) = %v", i, err)
		}
		checkStamps(t, m, b.Cluster, b.Host)
		out = append(out, b)
	}
	return out
}

// eventBatches decodes the event messages, checking their key and stamps.
func (r *recorder) eventBatches(t *testing.T) []schemas.EventBatch {
	t.Helper()
	var out []schemas.EventBatch
	for i, m := range r.messages(schemas.TopicGPUEvents) {
		var b schemas.EventBatch
		if err := schemas.DecodeEventBatch(m.value, &b); err != nil {
			t.Fatalf("DecodeEventBatch(message %d) = %v", i, err)
		}
		checkStamps(t, m, b.Cluster, b.Host)
		out = append(out, b)
	}
	return out
}

func checkStamps(t *testing.T, m message, cluster, host string) {
	t.Helper()
	if m.key != testHost || cluster != testCluster || host != testHost {
		t.Errorf("message on %s: key %q, cluster %q, host %q; want %q, %q, %q",
			m.topic, m.key, cluster, host, testHost, testCluster, testHost)
	}
	if m.ctxErr != nil {
		t.Errorf("message on %s published with a done context: %v", m.topic, m.ctxErr)
	}
}

// ticksOf returns the tick numbers of b's samples, in order and without
// repeats; tick n is at epoch + n*interval.
func ticksOf(t *testing.T, b schemas.SampleBatch, epoch time.Time, interval time.Duration) []int {
	t.Helper()
	var ticks []int
	for _, s := range b.Samples {
		d := s.Time().Sub(epoch)
		if d%interval != 0 {
			t.Fatalf("sample at %v is not on a tick", d)
		}
		n := int(d / interval)
		if len(ticks) == 0 || ticks[len(ticks)-1] != n {
			ticks = append(ticks, n)
		}
	}
	return ticks
}

// harness runs a Collector inside a synctest bubble.
type harness struct {
	c      *Collector
	reg    *prometheus.Registry
	epoch  time.Time
	cancel context.CancelFunc
	errc   chan error
}

func start(t *testing.T, cfg Config, src Source, pub Publisher) *harness {
	t.Helper()
	cfg.Cluster, cfg.Host = testCluster, testHost
	reg := prometheus.NewRegistry()
	c, err := New(cfg, src, pub, slog.New(slog.NewTextHandler(t.Output(), nil)), reg, nil)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{c: c, reg: reg, epoch: time.Now(), cancel: cancel, errc: make(chan error, 1)}
	go func() { h.errc <- c.Run(ctx) }()
	return h
}

// stop cancels Run and checks that it returned nil.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	if err := <-h.errc; err != nil {
		t.Errorf("Run() = %v; want nil", err)
	}
}

func (h *harness) metric(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestRunBatchesTicks(t *testing.T) {
	for _, tc := range []struct {
		name            string
		gpus            int
		interval        time.Duration
		publishInterval time.Duration
		maxTicks        int
		run             time.Duration
		wantTicks       [][]int // tick numbers of each message
	}{
		{
			name: "every tick", gpus: testGPUs, interval: 100 * time.Millisecond,
			run:       550 * time.Millisecond,
			wantTicks: [][]int{{1}, {2}, {3}, {4}, {5}},
		},
		{
			name: "10 ticks per message", gpus: testGPUs, interval: 100 * time.Millisecond,
			publishInterval: time.Second, run: 3050 * time.Millisecond,
			wantTicks: [][]int{seq(1, 10), seq(11, 20), seq(21, 30)},
		},
		{
			name: "tick cap", gpus: testGPUs, interval: 100 * time.Millisecond,
			publishInterval: time.Second, maxTicks: 4, run: 1250 * time.Millisecond,
			wantTicks: [][]int{seq(1, 4), seq(5, 8), seq(9, 12)},
		},
		{
			name: "publish interval rounded to ticks", gpus: testGPUs, interval: 300 * time.Millisecond,
			publishInterval: time.Second, run: 1850 * time.Millisecond,
			wantTicks: [][]int{seq(1, 3), seq(4, 6)},
		},
		{
			// 256 bytes per sample are assumed until the first message
			// is encoded: 4000 samples would exceed 900 KiB.
			name: "size cap", gpus: 1000, interval: 100 * time.Millisecond,
			publishInterval: time.Second, run: 1350 * time.Millisecond,
			wantTicks: [][]int{seq(1, 3), seq(4, 13)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub := &recorder{}
				cfg := Config{Interval: tc.interval, PublishInterval: tc.publishInterval, MaxTicksPerMessage: tc.maxTicks}
				h := start(t, cfg, &fakeSource{gpus: tc.gpus}, pub)
				time.Sleep(tc.run)
				h.stop(t)

				batches := pub.sampleBatches(t)
				var got [][]int
				total := 0
				for i, b := range batches {
					ticks := ticksOf(t, b, h.epoch, tc.interval)
					got = append(got, ticks)
					if len(b.GPUs) != tc.gpus || len(b.Samples) != len(ticks)*tc.gpus {
						t.Errorf("message %d: %d GPUs, %d samples; want %d, %d×%d",
							i, len(b.GPUs), len(b.Samples), tc.gpus, len(ticks), tc.gpus)
					}
					total += len(b.Samples)
				}
				if !slices.EqualFunc(got, tc.wantTicks, slices.Equal) {
					t.Errorf("ticks per message = %v; want %v", got, tc.wantTicks)
				}
				if n := h.metric(h.c.m.samplesN); int(n) != total {
					t.Errorf("samples metric = %v; want %d, the samples published", n, total)
				}
				if n := h.metric(h.c.m.samplesPublished); int(n) != len(tc.wantTicks) {
					t.Errorf("published messages metric = %v; want %d", n, len(tc.wantTicks))
				}
				if n := h.metric(h.c.m.gpusN); int(n) != tc.gpus {
					t.Errorf("gpus metric = %v; want %d", n, tc.gpus)
				}
			})
		})
	}
}

func TestRunFailingTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(tick int) (fail, outOfRange bool)
	}{
		{"error on even ticks", func(n int) (bool, bool) { return n%2 == 0, false }},
		{"out-of-range value on even ticks", func(n int) (bool, bool) { return false, n%2 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub := &recorder{}
				h := start(t, Config{Interval: 100 * time.Millisecond}, &fakeSource{gpus: testGPUs, bad: tc.bad}, pub)
				time.Sleep(50 * time.Millisecond)
				for tick := 1; tick <= 6; tick++ {
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
					wantSuccess := float64(tick % 2)
					if got := h.metric(h.c.m.success); got != wantSuccess {
						t.Errorf("after tick %d: success = %v; want %v", tick, got, wantSuccess)
					}
					if got, want := h.metric(h.c.m.errors), float64(tick/2); got != want {
						t.Errorf("after tick %d: errors = %v; want %v", tick, got, want)
					}
					if err := h.c.Ready(); (err == nil) != (tick%2 == 1) || err != nil && !strings.Contains(err.Error(), "fake samples: failing for") {
						t.Errorf("after tick %d: Ready() = %v; want nil after a good tick, fake samples failing after a bad one", tick, err)
					}
				}
				h.stop(t)

				var got [][]int
				for _, b := range pub.sampleBatches(t) {
					got = append(got, ticksOf(t, b, h.epoch, 100*time.Millisecond))
				}
				if want := [][]int{{1}, {3}, {5}}; !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("ticks per message = %v; want %v", got, want)
				}
				if got, want := h.metric(h.c.m.samplesN), float64(3*testGPUs); got != want {
					t.Errorf("samples metric = %v; want %v", got, want)
				}
			})
		})
	}
}

func TestRunPublishFails(t *testing.T) {
	for _, tc := range []struct {
		name            string
		publishInterval time.Duration
		failCalls       []int
		wantTicks       [][]int // of the messages published
	}{
		{
			name: "first two fail", failCalls: []int{1, 2},
			wantTicks: [][]int{{3}, {4}, {5}},
		},
		{
			name: "all fail", failCalls: []int{1, 2, 3, 4, 5},
		},
		{
			name: "failed batch not retried", publishInterval: 200 * time.Millisecond, failCalls: []int{1},
			wantTicks: [][]int{{3, 4}, {5}}, // tick 5 flushed on cancel
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub := &recorder{fail: func(n int) bool { return slices.Contains(tc.failCalls, n) }}
				cfg := Config{Interval: 100 * time.Millisecond, PublishInterval: tc.publishInterval}
				h := start(t, cfg, &fakeSource{gpus: testGPUs}, pub)
				time.Sleep(550 * time.Millisecond)
				h.stop(t)

				var got [][]int
				for _, b := range pub.sampleBatches(t) {
					got = append(got, ticksOf(t, b, h.epoch, 100*time.Millisecond))
				}
				if !slices.EqualFunc(got, tc.wantTicks, slices.Equal) {
					t.Errorf("ticks per published message = %v; want %v", got, tc.wantTicks)
				}
				if got, want := h.metric(h.c.m.samplesFailed), float64(len(tc.failCalls)); got != want {
					t.Errorf("failed messages metric = %v; want %v", got, want)
				}
				if got, want := h.metric(h.c.m.samplesPublished), float64(len(tc.wantTicks)); got != want {
					t.Errorf("published messages metric = %v; want %v", got, want)
				}
			})
		})
	}
}

func TestRunCancelFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pub := &recorder{}
		cfg := Config{Interval: 100 * time.Millisecond, PublishInterval: time.Second}
		h := start(t, cfg, &fakeSource{gpus: testGPUs}, pub)
		time.Sleep(550 * time.Millisecond)
		synctest.Wait()
		if n := len(pub.messages(schemas.TopicGPUSamples)); n != 0 {
			t.Fatalf("%d messages before cancel; want 0", n)
		}
		h.stop(t) // checkStamps checks the flush's context was not done

		batches := pub.sampleBatches(t)
		if len(batches) != 1 {
			t.Fatalf("%d messages after cancel; want 1", len(batches))
		}
		if got, want := ticksOf(t, batches[0], h.epoch, 100*time.Millisecond), seq(1, 5); !slices.Equal(got, want) {
			t.Errorf("ticks of flushed message = %v; want %v", got, want)
		}
	})
}

func xid(ms int64, uuid string, code uint64) schemas.GPUEvent {
	return schemas.GPUEvent{TSMillis: ms, GPUUUID: uuid, Type: schemas.EventXID, XID: code}
}

func TestRunEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e1, e2, e3 := xid(1, "GPU-0000", 79), xid(2, "GPU-0001", 48), xid(3, "GPU-0002", 0)
		e3.Type = schemas.EventECCDoubleBit
		e4 := xid(4, "GPU-0003", 31)
		src := &eventSource{fakeSource: &fakeSource{gpus: testGPUs}, watch: func(ctx context.Context, emit func(schemas.GPUEvent)) error {
			time.Sleep(120 * time.Millisecond)
			emit(e1) // e1 and e2 arrive within one tick: one message
			time.Sleep(10 * time.Millisecond)
			emit(e2)
			time.Sleep(220 * time.Millisecond)
			emit(e3)
			<-ctx.Done()
			emit(e4) // while shutting down: still published
			return ctx.Err()
		}}
		pub := &recorder{}
		h := start(t, Config{Interval: 100 * time.Millisecond}, src, pub)
		time.Sleep(550 * time.Millisecond)
		h.stop(t)

		var got [][]schemas.GPUEvent
		for _, b := range pub.eventBatches(t) {
			got = append(got, b.Events)
		}
		want := [][]schemas.GPUEvent{{e1, e2}, {e3}, {e4}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("event messages = %v; want %v", got, want)
		}
		for typ, want := range map[string]float64{"xid": 3, "ecc_double_bit": 1} {
			if got := h.metric(h.c.m.events.WithLabelValues("fake", typ)); got != want {
				t.Errorf("events metric {type=%q} = %v; want %v", typ, got, want)
			}
		}
		if got := h.metric(h.c.m.eventsPublished); got != 3 {
			t.Errorf("published event messages metric = %v; want 3", got)
		}
		if n := len(pub.messages(schemas.TopicGPUSamples)); n != 5 {
			t.Errorf("%d sample messages; want 5", n)
		}
	})
}

func TestRunEventsNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := xid(2, "GPU-\xff", 13) // not UTF-8: cannot be encoded
		good := []schemas.GPUEvent{xid(1, "GPU-0000", 79), xid(3, "GPU-0001", 48)}
		src := &eventSource{fakeSource: &fakeSource{gpus: testGPUs}, watch: func(ctx context.Context, emit func(schemas.GPUEvent)) error {
			time.Sleep(120 * time.Millisecond)
			emit(good[0])
			emit(bad)
			emit(good[1])
			<-ctx.Done()
			return nil
		}}
		pub := &recorder{}
		h := start(t, Config{Interval: 100 * time.Millisecond}, src, pub)
		time.Sleep(250 * time.Millisecond)
		h.stop(t)

		var got []schemas.GPUEvent
		for _, b := range pub.eventBatches(t) {
			got = append(got, b.Events...)
		}
		if !slices.Equal(got, good) {
			t.Errorf("events published = %v; want %v", got, good)
		}
		if got := h.metric(h.c.m.eventsFailed); got != 1 {
			t.Errorf("failed event messages metric = %v; want 1", got)
		}
	})
}

func TestRunEventWatch(t *testing.T) {
	errWatch := errors.New("event set broken")
	for _, tc := range []struct {
		name        string
		watchResult error
		wantErr     bool
		wantTicks   int // of the samples published
	}{
		// A failure stops Run, which publishes what is pending: tick 1's
		// samples and the event.
		{name: "watch fails", watchResult: errWatch, wantErr: true, wantTicks: 1},
		// A clean early end leaves sampling going on until cancelled.
		{name: "watch ends early", watchResult: nil, wantTicks: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := xid(1, "GPU-0000", 79)
				src := &eventSource{fakeSource: &fakeSource{gpus: testGPUs}, watch: func(ctx context.Context, emit func(schemas.GPUEvent)) error {
					time.Sleep(120 * time.Millisecond)
					emit(e)
					time.Sleep(30 * time.Millisecond)
					return tc.watchResult
				}}
				pub := &recorder{}
				cfg := Config{Interval: 100 * time.Millisecond, PublishInterval: time.Second}
				h := start(t, cfg, src, pub)
				time.Sleep(550 * time.Millisecond)
				synctest.Wait()
				h.cancel()
				err := <-h.errc
				if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, errWatch)) {
					t.Errorf("Run() = %v; want error %v", err, tc.wantErr)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "collector: watch events: ") {
					t.Errorf("Run() = %q; want it to start with %q", err, "collector: watch events: ")
				}
				evs := pub.eventBatches(t)
				if len(evs) != 1 || !slices.Equal(evs[0].Events, []schemas.GPUEvent{e}) {
					t.Errorf("event messages = %v; want one with %v", evs, e)
				}
				var ticks int
				for _, b := range pub.sampleBatches(t) {
					ticks += len(ticksOf(t, b, h.epoch, 100*time.Millisecond))
				}
				if ticks != tc.wantTicks {
					t.Errorf("ticks published = %d; want %d", ticks, tc.wantTicks)
				}
			})
		})
	}
}

// lostSource is a fakeSource that names devices it cannot sample.
type lostSource struct {
	*fakeSource
	lost error
}

func (s *lostSource) Lost() error { return s.lost }

// TestReadyNamesLostDevices: a source that samples some devices and cannot
// sample others makes readiness fail, naming them, while its ticks succeed.
func TestReadyNamesLostDevices(t *testing.T) {
	errLost := errors.New("gpu 5 GPU-0005 lost since 2025-03-01T12:00:00Z")
	for _, tc := range []struct {
		name    string
		lost    error
		wantErr string
	}{
		{name: "every device answers"},
		{name: "a device is lost", lost: errLost, wantErr: "fake gpus: " + errLost.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &lostSource{fakeSource: &fakeSource{gpus: testGPUs}, lost: tc.lost}
				h := start(t, Config{Interval: 100 * time.Millisecond}, src, &recorder{})
				time.Sleep(150 * time.Millisecond)
				synctest.Wait()
				err := h.c.Ready()
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("Ready() = %v; want nil", err)
				case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr || !errors.Is(err, tc.lost)):
					t.Errorf("Ready() = %v; want %q wrapping the source's error", err, tc.wantErr)
				}
				if got := h.metric(h.c.m.success); got != 1 {
					t.Errorf("success = %v; want 1: the tick sampled the devices that answer", got)
				}
				h.stop(t)
			})
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     Config
		wantErr string // substring; "" for valid
	}{
		{Config{}, ""},
		{Config{Interval: 100 * time.Millisecond}, ""},
		{Config{Interval: 100 * time.Millisecond, PublishInterval: 100 * time.Millisecond}, ""},
		{Config{Interval: time.Second, PublishInterval: time.Minute, MaxTicksPerMessage: 10}, ""},
		{Config{Interval: 99 * time.Millisecond}, "--collector.interval"},
		{Config{Interval: -time.Second}, "--collector.interval"},
		{Config{Interval: time.Second, PublishInterval: 999 * time.Millisecond}, "--collector.publish-interval"},
		{Config{PublishInterval: time.Second}, "--collector.publish-interval"}, // below the 5s default
		{Config{PublishInterval: -time.Second}, "--collector.publish-interval"},
		{Config{MaxTicksPerMessage: -1}, "--collector.max-ticks-per-message"},
		{Config{Host: strings.Repeat("h", schemas.MaxStringLen+1)}, "--collector.host"},
		{Config{Cluster: "a\xffb"}, "--collector.cluster"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v.Validate() = %v; want nil", tc.cfg, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%+v.Validate() = %v; want an error naming %s", tc.cfg, err, tc.wantErr)
		case err != nil && !strings.HasPrefix(err.Error(), "collector: "):
			t.Errorf("%+v.Validate() = %q; want the prefix %q", tc.cfg, err, "collector: ")
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want Config
	}{
		{
			name: "defaults",
			want: Config{Cluster: "default", Host: "HOSTNAME", Interval: 5 * time.Second, MaxTicksPerMessage: 600},
		},
		{
			name: "cluster from env",
			env:  map[string]string{"HELIOSTAT_CLUSTER": "eu-1"},
			want: Config{Cluster: "eu-1", Host: "HOSTNAME", Interval: 5 * time.Second, MaxTicksPerMessage: 600},
		},
		{
			name: "flags win",
			env:  map[string]string{"HELIOSTAT_CLUSTER": "eu-1"},
			args: []string{"--collector.cluster=us-2", "--collector.host=n1", "--collector.interval=100ms",
				"--collector.publish-interval=1s", "--collector.max-ticks-per-message=20"},
			want: Config{Cluster: "us-2", Host: "n1", Interval: 100 * time.Millisecond,
				PublishInterval: time.Second, MaxTicksPerMessage: 20},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.RegisterFlags(fs, func(k string) string { return tc.env[k] })
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%q) = %v", tc.args, err)
			}
			if tc.want.Host == "HOSTNAME" {
				// os.Hostname is the default; tolerate a machine without one.
				tc.want.Host = fs.Lookup("collector.host").DefValue
			}
			if cfg != tc.want {
				t.Errorf("Parse(%q) = %+v; want %+v", tc.args, cfg, tc.want)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%+v.Validate() = %v", cfg, err)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	pub, src := &recorder{}, &fakeSource{gpus: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		src  Source
		pub  Publisher
	}{
		{"no source", Config{Host: "h"}, nil, pub},
		{"no publisher", Config{Host: "h"}, src, nil},
		{"invalid config", Config{Host: "h", Interval: time.Millisecond}, src, pub},
	} {
		if _, err := New(tc.cfg, tc.src, tc.pub, nil, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "collector: ") {
			t.Errorf("%s: New() = %v; want a collector: error", tc.name, err)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Two collectors of different sources share the registry.
	for _, src := range []Source{&fakeSource{gpus: 1}, synthetic.New("h", 1, 1)} {
		if _, err := New(Config{Host: "h"}, src, &recorder{}, nil, reg, nil); err != nil {
			t.Fatalf("New(source %s) = %v", src.Name(), err)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("GatherAndLint() = %v", err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	if n, err := testutil.GatherAndCount(reg, "heliostat_collector_collect_errors_total"); err != nil || n != 2 {
		t.Errorf("collect errors series = %d, %v; want 2 (one per source)", n, err)
	}
}
