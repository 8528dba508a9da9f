package slurm

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// recorder is a collector.Publisher that decodes what it is given, as ingest
// would, and keeps it per job. failAfter > 0 makes it fail every publish
// after that many.
type recorder struct {
	t         testing.TB
	cluster   string
	mu        sync.Mutex
	events    map[string][]schemas.JobEvent
	allocs    map[string][]schemas.Alloc
	n         int
	failAfter int
}

func newRecorder(t testing.TB, cluster string) *recorder {
	return &recorder{t: t, cluster: cluster, events: map[string][]schemas.JobEvent{}, allocs: map[string][]schemas.Alloc{}}
}

func (r *recorder) Publish(_ context.Context, topic string, key, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAfter > 0 && r.n >= r.failAfter {
		return fmt.Errorf("recorder: publish %d refused", r.n+1)
	}
	r.n++
	switch topic {
	case schemas.TopicJobEvents:
		var b schemas.JobEventBatch
		if err := schemas.DecodeJobEventBatch(value, &b); err != nil {
			r.t.Errorf("job events message does not decode: %v", err)
			return nil
		}
		if b.Cluster != r.cluster || b.Source != schemas.SourceSlurm {
			r.t.Errorf("job events message of cluster %q source %v", b.Cluster, b.Source)
		}
		for _, e := range b.Events {
			if want := string(schemas.JobKey(r.cluster, e.JobID)); string(key) != want {
				r.t.Errorf("job %s event under key %q; want %q", e.JobID, key, want)
			}
			e.Nodes = append([]string(nil), e.Nodes...)
			r.events[e.JobID] = append(r.events[e.JobID], e)
		}
	case schemas.TopicAllocations:
		var b schemas.AllocBatch
		if err := schemas.DecodeAllocBatch(value, &b); err != nil {
			r.t.Errorf("allocations message does not decode: %v", err)
			return nil
		}
		for _, a := range b.Allocs {
			if want := string(schemas.JobKey(r.cluster, a.JobID)); string(key) != want {
				r.t.Errorf("job %s allocation under key %q; want %q", a.JobID, key, want)
			}
			r.allocs[a.JobID] = append(r.allocs[a.JobID], a)
		}
	default:
		r.t.Errorf("message on topic %q", topic)
	}
	return nil
}

// jobEvents returns a copy of the events recorded for a job.
func (r *recorder) jobEvents(id string) []schemas.JobEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schemas.JobEvent(nil), r.events[id]...)
}

func (r *recorder) jobAllocs(id string) []schemas.Alloc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schemas.Alloc(nil), r.allocs[id]...)
}

// eventCount returns the number of events recorded for all jobs.
func (r *recorder) eventCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, evs := range r.events {
		n += len(evs)
	}
	return n
}

// types returns the event types of evs, e.g. "SUBMIT START END".
func types(evs []schemas.JobEvent) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = e.Type.String()
	}
	return strings.Join(s, " ")
}

// testLogger logs through t.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
