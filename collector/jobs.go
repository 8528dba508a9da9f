package collector

import (
	"context"
	"fmt"

	"github.com/heliostat-dev/heliostat/schemas"
)

// JobPublisher encodes job events and allocation intervals and hands them to a
// Publisher: one message per job (keyed with schemas.JobKey, so a job's events
// stay in order on one partition) and one message per allocation key. Scheduler
// sources (slurm, sim) and the trace importer publish through it.
type JobPublisher struct {
	Pub     Publisher
	Cluster string
	Source  schemas.JobSource
	// Retries says that the caller keeps what it could not publish and
	// publishes it again (the GPU attributor, the Slurm source): messages
	// go through PublishRetried where Pub is a RetriedPublisher, so that a
	// message the full spool refuses is not counted by ingest as lost.
	// Default: false, a refused message is lost (the simulator).
	Retries bool
	buf     []byte
}

// publish hands one message to p.Pub.
func (p *JobPublisher) publish(ctx context.Context, topic string, key, value []byte) error {
	if rp, ok := p.Pub.(RetriedPublisher); ok && p.Retries {
		return rp.PublishRetried(ctx, topic, key, value)
	}
	return p.Pub.Publish(ctx, topic, key, value)
}

// PublishJob publishes events, which must all belong to one job, as one message.
func (p *JobPublisher) PublishJob(ctx context.Context, events []schemas.JobEvent) error {
	if len(events) == 0 {
		return nil
	}
	id := events[0].JobID
	for i := range events {
		if events[i].JobID != id {
			return fmt.Errorf("publish job events: events of jobs %q and %q in one message", id, events[i].JobID)
		}
	}
	var err error
	p.buf, err = schemas.AppendJobEventBatch(p.buf[:0], &schemas.JobEventBatch{Cluster: p.Cluster, Source: p.Source, Events: events})
	if err != nil {
		return fmt.Errorf("publish job %s: %w", id, err)
	}
	if err := p.publish(ctx, schemas.TopicJobEvents, schemas.JobKey(p.Cluster, id), p.buf); err != nil {
		return fmt.Errorf("publish job %s: %w", id, err)
	}
	return nil
}

// PublishAllocs publishes allocation intervals as one message with the given
// key (a host for node attribution, schemas.JobKey for scheduler records).
func (p *JobPublisher) PublishAllocs(ctx context.Context, key string, allocs []schemas.Alloc) error {
	if len(allocs) == 0 {
		return nil
	}
	var err error
	p.buf, err = schemas.AppendAllocBatch(p.buf[:0], &schemas.AllocBatch{Cluster: p.Cluster, Allocs: allocs})
	if err != nil {
		return fmt.Errorf("publish allocations %s: %w", key, err)
	}
	if err := p.publish(ctx, schemas.TopicAllocations, []byte(key), p.buf); err != nil {
		return fmt.Errorf("publish allocations %s: %w", key, err)
	}
	return nil
}
