package collector

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Defaults for the zero values of Config fields.
const (
	DefaultCluster            = "default"
	DefaultInterval           = 5 * time.Second
	DefaultMaxTicksPerMessage = 600
	// MinInterval is the shortest sampling interval Validate accepts.
	MinInterval = 100 * time.Millisecond
)

const (
	// logInterval is how often a recurring failure (a source failing every
	// tick, a full spool) is logged at most; each log says how many
	// failures it stands for.
	logInterval = time.Minute
	// flushTimeout bounds the publishing of what is pending at shutdown.
	// The Publisher spools a message whose write times out, so this costs
	// nothing but delay.
	flushTimeout = 5 * time.Second
	// maxMessageBytes bounds an encoded sample batch, below the 1 MB that
	// brokers (message.max.bytes) and the publisher's writer (1 MiB per
	// produce batch) take by default: a larger message would be rejected
	// and dropped for good. A batch is published early once the next tick
	// would take it past this.
	maxMessageBytes = 900 << 10
	// initialSampleBytes is the guess of an encoded sample's size until the
	// first message has been encoded: about the most a sample with every
	// metric present takes.
	initialSampleBytes = 256
	// eventQueue is how many events WatchEvents may emit while the run loop
	// is busy (collecting or publishing) before emit blocks.
	eventQueue = 256
)

// Config configures a Collector. The zero value of each field means its
// default.
type Config struct {
	// Cluster names the cluster the host belongs to; it is stamped on every
	// message.
	// Default: "default", or $HELIOSTAT_CLUSTER when set (flag default).
	Cluster string
	// Host names the host; it is stamped on every message and is the Kafka
	// key, so that one host's messages stay in order on one partition.
	// Default: os.Hostname().
	Host string
	// Interval is the time between two ticks, each of which samples every
	// GPU once. At least 100ms.
	// Default: 5s.
	Interval time.Duration
	// PublishInterval is how often a sample message is published. Zero means
	// every tick; otherwise it must be at least Interval, and one message
	// carries all ticks since the last, round(PublishInterval/Interval) of
	// them: at a 100ms Interval and a 1s PublishInterval a message holds 10
	// ticks. Fewer ticks make up a message that would otherwise exceed
	// MaxTicksPerMessage or about 900 KiB.
	// Default: 0, every tick.
	PublishInterval time.Duration
	// MaxTicksPerMessage caps the ticks in one message: reaching it forces a
	// publish whatever PublishInterval says.
	// Default: 600.
	MaxTicksPerMessage int
}

// RegisterFlags registers the collector's flags on fs, with the defaults
// filled in. getenv supplies defaults from the environment
// (HELIOSTAT_CLUSTER); nil means none.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	cluster := envdefault.String(getenv, "HELIOSTAT_CLUSTER", DefaultCluster)
	// An unknown hostname leaves the default empty; New then fails and
	// names the flag to set.
	host, _ := os.Hostname()
	fs.StringVar(&c.Cluster, "collector.cluster", cluster,
		"name of the cluster this host belongs to (env HELIOSTAT_CLUSTER)")
	fs.StringVar(&c.Host, "collector.host", host,
		"name of this host, stamped on every message and used as the Kafka key")
	fs.DurationVar(&c.Interval, "collector.interval", DefaultInterval,
		"time between two samples of every GPU; at least 100ms")
	fs.DurationVar(&c.PublishInterval, "collector.publish-interval", 0,
		"how often to publish a message holding all samples since the last; 0 publishes every sample tick")
	fs.IntVar(&c.MaxTicksPerMessage, "collector.max-ticks-per-message", DefaultMaxTicksPerMessage,
		"most sample ticks in one message; reaching it forces a publish")
}

// Validate reports the first invalid field, named by its flag. Zero fields
// are valid: they mean their defaults.
func (c Config) Validate() error {
	for _, s := range []struct{ flag, v string }{{"collector.cluster", c.Cluster}, {"collector.host", c.Host}} {
		if len(s.v) > schemas.MaxStringLen {
			return fmt.Errorf("collector: --%s: %d bytes exceeds %d", s.flag, len(s.v), schemas.MaxStringLen)
		}
		if !utf8.ValidString(s.v) {
			return fmt.Errorf("collector: --%s: %q is not valid UTF-8", s.flag, s.v)
		}
	}
	interval := c.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval < MinInterval {
		return fmt.Errorf("collector: --collector.interval: %v is below the minimum %v", c.Interval, MinInterval)
	}
	if c.PublishInterval < 0 {
		return fmt.Errorf("collector: --collector.publish-interval: %v is negative", c.PublishInterval)
	}
	if c.PublishInterval != 0 && c.PublishInterval < interval {
		return fmt.Errorf("collector: --collector.publish-interval: %v is shorter than --collector.interval %v", c.PublishInterval, interval)
	}
	if c.MaxTicksPerMessage < 0 {
		return fmt.Errorf("collector: --collector.max-ticks-per-message: %d is negative", c.MaxTicksPerMessage)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("collector: --collector.host not set and hostname unknown: %w", err)
		}
		c.Host = h
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxTicksPerMessage == 0 {
		c.MaxTicksPerMessage = DefaultMaxTicksPerMessage
	}
	return c, nil
}

// ticksPerMessage is how many ticks one sample message carries.
func (c Config) ticksPerMessage() int {
	n := 1
	if c.PublishInterval > 0 {
		n = int((c.PublishInterval + c.Interval/2) / c.Interval)
	}
	return max(1, min(n, c.MaxTicksPerMessage))
}

// lostReporter is a Source that can name the devices it cannot sample (the
// nvml source: GPUs that fell off the bus, or could not be enumerated at
// start-up) while it samples the others.
type lostReporter interface {
	// Lost returns nil while every device answers, and otherwise an error
	// naming each one that does not.
	Lost() error
}

// Collector samples a Source every tick and publishes the samples, and the
// events of a Source that is also an EventSource, through a Publisher.
//
// It reuses its encoding buffers from one message to the next, so the
// Publisher must not keep key or value after Publish returns;
// publish.Publisher copies both (into the Kafka writer's message or the
// spool) before it returns.
type Collector struct {
	cfg     Config
	src     Source
	events  EventSource  // nil unless src is one
	lost    lostReporter // nil unless src is one
	pub     Publisher
	logger  *slog.Logger
	now     func() time.Time
	m       *metrics
	key     []byte // Kafka key of every message: the host
	perMsg  int    // ticks per sample message
	srcName string

	// The fields below belong to Run's goroutine.

	batch       schemas.SampleBatch // samples not yet published
	ticks       int                 // ticks since the last sample publish
	tickSamples int                 // samples of the last successful tick
	sampleBytes int                 // encoded bytes per sample, last message
	buf         []byte

	evBatch schemas.EventBatch // events not yet published
	evBuf   []byte

	logs logthrottle.Throttle // keys: collect, samples, events

	// health holds the outcome of the last tick, for Ready.
	health *health.Status
	ticked *health.Cond
}

// New returns a Collector of src's samples (and events, if src is an
// EventSource) that publishes through pub. cfg is validated and its zero
// fields defaulted. Metrics are registered on reg if it is not nil; several
// Collectors with differently named sources may share one registry. now is
// the clock stamped on samples; nil means time.Now.
func New(cfg Config, src Source, pub Publisher, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Collector, error) {
	if src == nil {
		return nil, errors.New("collector: no source")
	}
	if pub == nil {
		return nil, errors.New("collector: no publisher")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	m := newMetrics()
	if reg != nil {
		if err := m.register(reg); err != nil {
			return nil, fmt.Errorf("collector: register metrics: %w", err)
		}
	}
	name := src.Name()
	m.bind(name)
	c := &Collector{
		cfg:         cfg,
		src:         src,
		pub:         pub,
		logger:      logger.With("source", name),
		now:         now,
		m:           m,
		key:         []byte(cfg.Host),
		perMsg:      cfg.ticksPerMessage(),
		srcName:     name,
		sampleBytes: initialSampleBytes,
		logs:        logthrottle.Throttle{Every: logInterval},
	}
	if es, ok := src.(EventSource); ok {
		c.events = es
	}
	if lr, ok := src.(lostReporter); ok {
		c.lost = lr
	}
	c.health = health.New(time.Now)
	c.ticked = c.health.Add(name+" samples", "waiting for the first sample")
	c.batch.Cluster, c.batch.Host = cfg.Cluster, cfg.Host
	c.evBatch.Cluster, c.evBatch.Host = cfg.Cluster, cfg.Host
	return c, nil
}

// Ready returns nil once the last sample tick succeeded and, for a source
// that can tell, every device answers; otherwise it says why the tick failed
// and since when, and names each device that does not answer ("nvml gpus:
// gpu 5 GPU-… lost since …"): part of the collector's /-/ready.
func (c *Collector) Ready() error {
	err := c.health.Err()
	if c.lost == nil {
		return err
	}
	if lerr := c.lost.Lost(); lerr != nil {
		err = errors.Join(err, fmt.Errorf("%s gpus: %w", c.srcName, lerr))
	}
	return err
}

// Run samples the source every Interval and publishes until ctx is done;
// then it lets a publish in flight finish, publishes what is pending, with up
// to 5s for it, and returns nil.
// If the source is an EventSource, Run watches its events in a goroutine it
// owns and publishes them at the next tick; if watching fails (for the nvml
// source: the driver went away, not a single GPU), Run stops, publishes what
// is pending and returns the error. A failing tick or publish is counted and
// logged, and Run goes on. Run must not be called concurrently with itself.
func (c *Collector) Run(ctx context.Context) error {
	c.logger.Info("collector started", "cluster", c.cfg.Cluster, "host", c.cfg.Host,
		"interval", c.cfg.Interval, "ticks_per_message", c.perMsg, "events", c.events != nil)
	ticker := time.NewTicker(c.cfg.Interval)
	defer ticker.Stop()

	// The watcher goroutine ends when WatchEvents returns, which it does
	// once watchCtx is done; Run cancels watchCtx before it returns and
	// waits for watchDone, receiving events all the while, so emit never
	// blocks forever and no event is left in the queue.
	var (
		events    chan schemas.GPUEvent
		watchDone chan error
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if c.events != nil {
		events = make(chan schemas.GPUEvent, eventQueue)
		watchDone = make(chan error, 1)
		go func() {
			watchDone <- c.events.WatchEvents(watchCtx, func(e schemas.GPUEvent) { events <- e })
		}()
	}

	// A publish must not be cut short by shutdown: publish.Publisher would
	// spool a message whose write was cancelled and send it again, a
	// duplicate if the broker had already stored it. Its own write timeout
	// bounds the wait instead.
	pctx := context.WithoutCancel(ctx)
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C:
			if ctx.Err() != nil {
				break loop // a tick racing shutdown would fail for nothing
			}
			c.publishEvents(pctx)
			c.tick(ctx, pctx)
		case e := <-events:
			c.addEvent(pctx, e)
		case err := <-watchDone:
			watchDone = nil
			c.drainEvents(pctx, events)
			if runErr = c.watchEnded(ctx, err); runErr != nil {
				break loop
			}
		}
	}

	ticker.Stop()
	stopWatch()
	// The run context may be done; what is pending still deserves a
	// bounded attempt.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	for watchDone != nil {
		select {
		case e := <-events:
			c.addEvent(fctx, e)
		case err := <-watchDone:
			watchDone = nil
			c.drainEvents(fctx, events)
			_ = c.watchEnded(ctx, err) // ctx is done: logged, not returned
		}
	}
	c.publishEvents(fctx)
	c.publishSamples(fctx)
	c.logSuppressed()
	return runErr
}

// watchEnded handles the end of WatchEvents with err. While ctx is live, a
// failure ends Run (returned) and a clean end leaves sampling going on;
// once ctx is done, only a failure other than the cancellation is logged.
func (c *Collector) watchEnded(ctx context.Context, err error) error {
	switch {
	case ctx.Err() == nil && err != nil:
		return fmt.Errorf("collector: watch events: %w", err)
	case ctx.Err() == nil:
		c.logger.Info("event watch ended, sampling goes on")
	case err != nil && !errors.Is(err, context.Canceled):
		c.logger.Warn("event watch failed during shutdown", "err", err)
	}
	return nil
}

// logSuppressed logs the failures that throttling held back, so that a
// failure that stopped recurring is still in the log.
func (c *Collector) logSuppressed() {
	if n := c.logs.Held("collect"); n > 0 {
		c.logger.Warn("collect failed", "failed_ticks", n)
	}
	if n := c.logs.Held("samples"); n > 0 {
		c.logger.Warn("publish samples failed, dropping them", "topic", schemas.TopicGPUSamples, "messages", n)
	}
	if n := c.logs.Held("events"); n > 0 {
		c.logger.Error("publish events failed, events lost", "topic", schemas.TopicGPUEvents, "events", n)
	}
}

// drainEvents takes the events left in the queue after the watcher ended.
func (c *Collector) drainEvents(ctx context.Context, events chan schemas.GPUEvent) {
	for {
		select {
		case e := <-events:
			c.addEvent(ctx, e)
		default:
			return
		}
	}
}

// tick collects one tick into the pending batch, under ctx, and publishes
// the batch under pctx when it is due.
func (c *Collector) tick(ctx, pctx context.Context) {
	samples, gpus := len(c.batch.Samples), len(c.batch.GPUs)
	start := time.Now()
	err := c.src.Collect(ctx, c.now(), &c.batch)
	if err == nil {
		err = checkTick(&c.batch, samples, gpus)
	}
	c.m.duration.Observe(time.Since(start).Seconds())
	c.ticks++
	if ctx.Err() == nil {
		c.ticked.Report(err)
	}
	if err != nil {
		// The Source contract: a failed tick's samples are not kept. The
		// GPUs it added go too (kept samples refer only to earlier ones),
		// so that an invalid identity cannot fail the whole message.
		c.batch.Samples = c.batch.Samples[:samples]
		c.batch.GPUs = c.batch.GPUs[:gpus]
		c.m.success.Set(0)
		c.m.errors.Inc()
		if n, ok := c.logs.Note("collect", c.now(), 1); ok {
			c.logger.Warn("collect failed", "err", err, "failed_ticks", n)
		}
	} else {
		n := len(c.batch.Samples) - samples
		c.tickSamples = n
		c.m.success.Set(1)
		c.m.samplesN.Add(float64(n))
		c.m.gpusN.Set(float64(n))
	}
	next := len(c.batch.Samples) + c.tickSamples
	if c.ticks >= c.perMsg || next*c.sampleBytes > maxMessageBytes || next > schemas.MaxSamplesPerMessage {
		c.publishSamples(pctx)
	}
}

// checkTick checks the samples and GPUs a tick added (from index samples and
// gpus on) against the limits of the wire format, so that one bad value
// fails its tick instead of the whole message.
func checkTick(b *schemas.SampleBatch, samples, gpus int) error {
	if len(b.GPUs) > schemas.MaxGPUsPerMessage {
		return fmt.Errorf("collector: check tick: %d GPUs exceeds %d", len(b.GPUs), schemas.MaxGPUsPerMessage)
	}
	for i := gpus; i < len(b.GPUs); i++ {
		g := &b.GPUs[i]
		for _, s := range [...]string{g.UUID, g.PCIBusID, g.Model, g.DriverVersion, g.MIGUUID, g.MIGProfile} {
			if len(s) > schemas.MaxStringLen || !utf8.ValidString(s) {
				return fmt.Errorf("collector: check tick: gpus[%d] (%.64q) has an identity string too long or not UTF-8", i, g.UUID)
			}
		}
	}
	for i := samples; i < len(b.Samples); i++ {
		s := &b.Samples[i]
		if int(s.GPU) >= len(b.GPUs) {
			return fmt.Errorf("collector: check tick: samples[%d].gpu = %d, batch has %d GPUs", i, s.GPU, len(b.GPUs))
		}
		if s.Present>>schemas.NumMetrics != 0 {
			return fmt.Errorf("collector: check tick: samples[%d] marks unknown metrics present (%#x)", i, s.Present)
		}
		for p := s.Present; p != 0; p &= p - 1 {
			m := schemas.Metric(bits.TrailingZeros32(p))
			if info := m.Info(); !info.Float && s.Values[m] > info.Max {
				return fmt.Errorf("collector: check tick: samples[%d].%s = %d exceeds %d", i, m, s.Values[m], info.Max)
			}
		}
	}
	return nil
}

// publishSamples publishes the pending samples, if any, and empties the
// batch whatever the outcome: a sample the Publisher refused is not retried,
// since the Publisher already spools on broker failure and refuses only
// when its spool is full (dropping the newest by design).
func (c *Collector) publishSamples(ctx context.Context) {
	defer func() {
		c.batch.Reset()
		c.batch.Cluster, c.batch.Host = c.cfg.Cluster, c.cfg.Host
		c.ticks = 0
	}()
	n := len(c.batch.Samples)
	if n == 0 {
		return
	}
	buf, err := schemas.AppendSampleBatch(c.buf[:0], &c.batch)
	c.buf = buf
	if err != nil {
		err = fmt.Errorf("collector: encode sample batch: %w", err)
	} else {
		c.sampleBytes = max(1, (len(buf)+n-1)/n)
		err = c.pub.Publish(ctx, schemas.TopicGPUSamples, c.key, buf)
	}
	if err == nil {
		c.m.samplesPublished.Inc()
		return
	}
	c.m.samplesFailed.Inc()
	if msgs, ok := c.logs.Note("samples", c.now(), 1); ok {
		c.logger.Warn("publish samples failed, dropping them", "topic", schemas.TopicGPUSamples,
			"err", err, "messages", msgs, "samples", n)
	}
}

// addEvent counts e and queues it for the next tick's event message.
func (c *Collector) addEvent(ctx context.Context, e schemas.GPUEvent) {
	c.m.events.WithLabelValues(c.srcName, e.Type.String()).Inc()
	c.evBatch.Events = append(c.evBatch.Events, e)
	if len(c.evBatch.Events) >= schemas.MaxEventsPerMessage {
		c.publishEvents(ctx)
	}
}

// publishEvents publishes the pending events, if any, as one message. If
// they cannot be encoded together (one of them is invalid), each is sent on
// its own so that only the invalid ones are lost. Every loss is counted and
// logged.
func (c *Collector) publishEvents(ctx context.Context) {
	evs := c.evBatch.Events
	if len(evs) == 0 {
		return
	}
	if err := c.sendEvents(ctx); err != nil && len(evs) > 1 && errors.Is(err, errEncode) {
		for i := range evs {
			c.evBatch.Events = evs[i : i+1]
			_ = c.sendEvents(ctx)
		}
	}
	c.evBatch.Events = evs[:0]
}

// errEncode marks an encoding failure for publishEvents.
var errEncode = errors.New("collector: encode")

// sendEvents publishes c.evBatch as one message, counting and logging a
// failure.
func (c *Collector) sendEvents(ctx context.Context) error {
	buf, err := schemas.AppendEventBatch(c.evBuf[:0], &c.evBatch)
	c.evBuf = buf
	if err != nil {
		err = fmt.Errorf("%w event batch: %w", errEncode, err)
		if len(c.evBatch.Events) > 1 {
			return err // publishEvents retries them one by one
		}
	} else {
		err = c.pub.Publish(ctx, schemas.TopicGPUEvents, c.key, buf)
	}
	if err == nil {
		c.m.eventsPublished.Inc()
		return nil
	}
	c.m.eventsFailed.Inc()
	n := len(c.evBatch.Events)
	if lost, ok := c.logs.Note("events", c.now(), n); ok {
		c.logger.Error("publish events failed, events lost", "topic", schemas.TopicGPUEvents,
			"err", err, "events", lost, "gpu_uuid", c.evBatch.Events[0].GPUUUID)
	}
	return err
}
