// Package collector samples GPUs on a host at a fixed interval and publishes the
// samples and device events to Kafka. Sources (NVML, synthetic) live in their own
// packages and satisfy the small interfaces below.
package collector

import (
	"context"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Source produces one tick of GPU samples for the host it runs on.
type Source interface {
	// Name identifies the source in logs and metrics, e.g. "nvml".
	Name() string
	// Collect appends one sample per device, taken at now, to b. It registers
	// each device with b.AddGPU and sets only the metrics the device
	// supports. An error means the tick failed; samples already appended for
	// it are kept only if Collect returns nil.
	Collect(ctx context.Context, now time.Time, b *schemas.SampleBatch) error
}

// EventSource watches device events (XID errors, ECC errors) until ctx ends.
type EventSource interface {
	// WatchEvents blocks, calling emit for each event, until ctx is done or
	// watching fails.
	WatchEvents(ctx context.Context, emit func(schemas.GPUEvent)) error
}

// Publisher delivers one message to a topic. It returns nil once the message is
// either acknowledged by the broker or safely spooled for later delivery.
type Publisher interface {
	Publish(ctx context.Context, topic string, key, value []byte) error
}

// RetriedPublisher is implemented by a Publisher (publish.Publisher) that
// can be told its caller keeps a message it refuses and publishes it again:
// such a message, refused because the spool or its disk is full (or any
// write failed and was cut off again), then leaves no gap in
// the sequence numbers, which ingest would count as a lost message.
type RetriedPublisher interface {
	PublishRetried(ctx context.Context, topic string, key, value []byte) error
}
