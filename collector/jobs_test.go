package collector

import (
	"context"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// callLog records which publisher method each message went through.
type callLog struct{ calls []string }

func (l *callLog) Publish(context.Context, string, []byte, []byte) error {
	l.calls = append(l.calls, "Publish")
	return nil
}

// retriedPublisher is a RetriedPublisher.
type retriedPublisher struct{ callLog }

func (p *retriedPublisher) PublishRetried(context.Context, string, []byte, []byte) error {
	p.calls = append(p.calls, "PublishRetried")
	return nil
}

// TestJobPublisherRetries: a JobPublisher whose caller retries uses
// PublishRetried where the publisher has it, so that a message the full
// spool refuses is not counted by ingest as lost.
func TestJobPublisherRetries(t *testing.T) {
	tests := []struct {
		name    string
		retries bool
		retried bool // the publisher is a RetriedPublisher
		want    string
	}{
		{"retries", true, true, "PublishRetried"},
		{"does not retry", false, true, "Publish"},
		{"retries, publisher without PublishRetried", true, false, "Publish"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				pub Publisher
				log *callLog
			)
			if tt.retried {
				p := &retriedPublisher{}
				pub, log = p, &p.callLog
			} else {
				log = &callLog{}
				pub = log
			}
			jp := &JobPublisher{Pub: pub, Cluster: "c", Source: schemas.SourceSlurm, Retries: tt.retries}
			ctx := context.Background()
			if err := jp.PublishJob(ctx, []schemas.JobEvent{{JobID: "1", Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: 1}}); err != nil {
				t.Fatalf("PublishJob() = %v", err)
			}
			if err := jp.PublishAllocs(ctx, "node1", []schemas.Alloc{{Host: "node1", GPUUUID: "GPU-0", JobID: "1", StartMillis: 1, Source: schemas.AllocCgroup}}); err != nil {
				t.Fatalf("PublishAllocs() = %v", err)
			}
			if got := log.calls; len(got) != 2 || got[0] != tt.want || got[1] != tt.want {
				t.Errorf("publisher calls = %v; want [%s %s]", got, tt.want, tt.want)
			}
		})
	}
}
