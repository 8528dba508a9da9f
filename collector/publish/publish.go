// Package publish delivers the collector's messages to Kafka, with an
// on-disk spool in front of the brokers so that a broker outage costs
// neither data nor collector time.
//
// Publish writes a message straight to the brokers while the spool is empty.
// If that write fails, or while the spool holds anything, the message is
// appended to the spool instead, so that nothing overtakes a spooled
// message; Run replays the spool, oldest first, once the brokers answer
// again. Messages with the same topic and key reach the same partition in
// the order Publish was called.
//
// # Delivery guarantees
//
// Delivery to Kafka is at least once. A message Publish accepted (returned
// nil for) is either acknowledged by all in-sync replicas or in the spool,
// synced to disk. Duplicates come from two places, each rare: a direct write
// that timed out after the broker had stored it is spooled and sent again;
// and a crash between the broker acknowledging a replay batch (at most 500
// messages) and the spool recording it replays that batch on the next start.
// After a partial failure of a replay batch only the failed messages are
// retried; that cannot reorder messages of one key, because a batch is
// bounded so that each partition's share goes in one produce request.
//
// Every message carries the headers schemas.HeaderProducer (an id drawn
// when the Publisher is created, and drawn again once Config.SequenceKeys
// keys have been numbered under it) and schemas.HeaderSequence (its number
// among this producer's messages with the same topic and key, from 1),
// stored with it in the spool, so a copy sent again carries the same pair.
// Ingest drops a message numbered at or below the highest number it stored
// for that producer and key, which makes delivery to ClickHouse exactly
// once, and counts gaps in the numbers, which are messages lost before
// Kafka (the drops below).
//
// Messages are lost only when the spool is full (Publish then returns an
// error wrapping spool.ErrFull, or syscall.ENOSPC where its disk is full,
// and the drop is counted and logged) or when the brokers reject a message
// for good (too large, invalid topic; when a whole produce request is
// refused its messages are resent one by one so only the culprit is
// dropped); both are counted as outcome "dropped". Spooled messages are
// also lost where the spool's disk loses them (a segment file deleted or
// damaged): the spool skips what it cannot read any more and counts it.
//
// # Spool failures
//
// A spool that cannot be read (EIO) or cannot record what was replayed (its
// cursor cannot be written) does not stop Run: the failure is logged (at
// most once a minute per operation), counted, shown by Ready, and retried
// with the same backoff as a broker failure, until it succeeds. Meanwhile
// Publish keeps appending to the spool, so nothing overtakes what waits in
// it; stopping the process instead would gain nothing, since the next start
// reads the same disk, or fails to open it and publishes nothing at all.
package publish

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/collector/spool"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// ErrClosed is returned by Publish and Flush after Close.
var ErrClosed = errors.New("publish: closed")

const (
	// replayBatchMessages and replayBatchBytes bound one replay write. The
	// byte bound keeps each partition's share of a batch inside one kafka-go
	// produce request (writerBatchBytes), so a batch succeeds or fails per
	// partition as a whole.
	replayBatchMessages = 500
	replayBatchBytes    = 512 << 10
	writerBatchBytes    = 1 << 20
	// writerBatchTimeout is how long kafka-go waits for a partition's batch
	// to fill before sending it. Writes are synchronous, so this is added
	// latency, not a throughput knob; it stays small.
	writerBatchTimeout = 5 * time.Millisecond
	writerMaxAttempts  = 3

	backoffMin      = time.Second
	backoffMax      = 30 * time.Second
	dropLogInterval = 10 * time.Second
	// spoolLogInterval is how often a spool failure that keeps recurring
	// is logged at most, per operation.
	spoolLogInterval = time.Minute
)

// Values of the op label of heliostat_publisher_spool_errors_total.
const (
	opRead   = "read"   // taking the next messages to replay
	opCommit = "commit" // recording that they were replayed
)

// spoolError is a failure of the spool during a replay, as opposed to one of
// the brokers.
type spoolError struct {
	op  string // opRead or opCommit
	err error
}

func (e *spoolError) Error() string { return fmt.Sprintf("publish: spool %s: %v", e.op, e.err) }
func (e *spoolError) Unwrap() error { return e.err }

// Publisher publishes messages to Kafka and spools them while Kafka is
// unreachable. It satisfies collector.Publisher. Its methods are safe for
// concurrent use.
type Publisher struct {
	cfg       Config
	logger    *slog.Logger
	spool     *spool.Spool
	transport *kafka.Transport
	sec       *kafkaconn.Security
	w         *kafka.Writer
	m         *metrics
	now       func() time.Time
	// backoff bounds between failed replays; tests shorten them.
	backoffMin, backoffMax time.Duration

	wake chan struct{} // a message was spooled
	done chan struct{} // closed by Close

	// mu serialises Publish, so that a message cannot overtake one whose
	// direct write is failing over to the spool, and guards producer and seqs.
	mu     sync.Mutex
	closed bool
	// producer is the id in the schemas.HeaderProducer header of the
	// messages numbered now; seqs holds the last number it gave per topic
	// and key. Both change together when seqs reaches cfg.SequenceKeys.
	producer string
	seqs     map[string]uint64

	// replayMu serialises replays (Run and Flush) and guards pending.
	replayMu sync.Mutex
	pending  *replayBatch

	// stateMu guards the fields used for logging state changes.
	stateMu  sync.Mutex
	spooling bool
	replayed int
	// drops throttles the spool-full log line.
	drops logthrottle.Throttle
	// spoolFailures is the number of replays failed by the spool in a row,
	// 0 while it works, and spoolFailedOp the operation that failed last;
	// spoolLogs throttles their log lines.
	spoolFailures int
	spoolFailedOp string
	spoolLogs     logthrottle.Throttle
	// health is failing from entering spooling until the spool drains, and
	// while the spool fails.
	health    *health.Status
	brokers   *health.Cond
	spoolCond *health.Cond
}

// replayBatch is a batch taken from the spool. records is what to commit
// once msgs, the messages not yet acknowledged, is empty.
type replayBatch struct {
	records int
	msgs    []kafka.Message
}

// New opens the spool in cfg.SpoolDir and returns a Publisher for the
// brokers in cfg. Metrics are registered on reg if it is not nil. Call Run
// to replay spooled messages and Close when done.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	producer := newProducerID()
	cfg.Kafka.Logger = logger
	sec, err := cfg.Kafka.Load()
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	sp, err := spool.Open(cfg.SpoolDir, cfg.SpoolMaxBytes, logger)
	if err != nil {
		return nil, fmt.Errorf("publish: open spool: %w", err)
	}
	transport := sec.Transport("heliostat-collector")
	p := &Publisher{
		cfg:       cfg,
		logger:    logger,
		spool:     sp,
		transport: transport,
		sec:       sec,
		producer:  producer,
		seqs:      map[string]uint64{},
		drops:     logthrottle.Throttle{Every: dropLogInterval},
		spoolLogs: logthrottle.Throttle{Every: spoolLogInterval},
		w: &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Balancer:               &kafka.Hash{},
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			WriteTimeout:           cfg.WriteTimeout,
			ReadTimeout:            cfg.WriteTimeout,
			MaxAttempts:            writerMaxAttempts,
			BatchSize:              replayBatchMessages,
			BatchBytes:             writerBatchBytes,
			BatchTimeout:           writerBatchTimeout,
			Transport:              transport,
		},
		m:          newMetrics(sp),
		now:        time.Now,
		backoffMin: backoffMin,
		backoffMax: backoffMax,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	p.health = health.New(func() time.Time { return p.now() })
	p.brokers = p.health.Add("kafka", "")
	p.spoolCond = p.health.Add("spool", "")
	if reg != nil {
		if err := p.m.register(reg); err != nil {
			_ = sp.Close()
			return nil, fmt.Errorf("publish: register metrics: %w", err)
		}
	}
	// The id lets an operator tie ingest's sequence warnings to this process.
	logger.Info("publisher ready", "producer", producer, "brokers", cfg.Brokers, "kafka_security", sec.String(), "spool_dir", cfg.SpoolDir, "spooled_messages", sp.Len())
	return p, nil
}

// newProducerID draws a random producer id: 64 random bits as 16 hex
// digits, so two Publishers, in this process or any other, share one with a
// chance that can be neglected. (crypto/rand.Read does not fail.)
func newProducerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Producer returns the id this Publisher puts in the schemas.HeaderProducer
// header of the messages it numbers now. It waits for a Publish in progress.
func (p *Publisher) Producer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producer
}

// nextSequence numbers a message for topic and key. The caller holds p.mu.
// A key beyond cfg.SequenceKeys starts a new producer id: the counters of
// the old one are dropped (messages already numbered keep their numbers), so
// the counters of a source that keys by job do not grow without bound.
func (p *Publisher) nextSequence(topic string, key []byte) schemas.Sequence {
	k := topic + "\x00" + string(key)
	n, ok := p.seqs[k]
	if !ok && len(p.seqs) >= p.cfg.SequenceKeys {
		old := p.producer
		p.producer = newProducerID()
		clear(p.seqs)
		p.m.rotations.Inc()
		p.logger.Info("new producer id: the message keys numbered under the old one reached the bound",
			"old_producer", old, "producer", p.producer, "keys", p.cfg.SequenceKeys)
	}
	n++
	p.seqs[k] = n
	return schemas.Sequence{Producer: p.producer, Seq: n}
}

// giveBack returns seq, the number the last message of topic and key got,
// for the next one. The caller holds p.mu, and has held it since seq was
// given: no other message of that key has been numbered since.
func (p *Publisher) giveBack(topic string, key []byte, seq schemas.Sequence) {
	k := topic + "\x00" + string(key)
	if p.producer != seq.Producer || p.seqs[k] != seq.Seq {
		return
	}
	if seq.Seq == 1 {
		delete(p.seqs, k)
		return
	}
	p.seqs[k] = seq.Seq - 1
}

// Publish delivers one message, keyed as given. It returns nil once the
// brokers acknowledged the message or it is safely in the spool. It returns
// an error if the message is dropped: the spool is full (the error wraps
// spool.ErrFull), the brokers rejected the message for good, or the
// Publisher is closed. A dropped message keeps its sequence number, so that
// ingest counts the gap it leaves as a lost message.
func (p *Publisher) Publish(ctx context.Context, topic string, key, value []byte) error {
	return p.publish(ctx, topic, key, value, false)
}

// PublishRetried is Publish for a caller that keeps a message Publish
// refused and publishes it again later (the GPU attributor, the Slurm
// source): a message the spool refuses (at its bound, its disk full, any
// other failed write) gives its sequence number back, to the next message of
// its key, so that ingest does not count as lost a message that is not. Only
// a failed write that may have stayed on disk (spool.ErrTorn) keeps its
// number. Numbers stay in the order of the messages sent and spooled: none
// is given between the refused one's and its return.
func (p *Publisher) PublishRetried(ctx context.Context, topic string, key, value []byte) error {
	return p.publish(ctx, topic, key, value, true)
}

func (p *Publisher) publish(ctx context.Context, topic string, key, value []byte, retried bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	// Numbered before anything can fail, so a message dropped below leaves
	// a gap that ingest counts (but for a retried one the full spool
	// refuses).
	seq := p.nextSequence(topic, key)
	// A caller that already gave up (a shutdown) gets its message spooled
	// without a write that kafka-go might still complete, which the replay
	// would then send a second time.
	if p.spool.Len() == 0 && ctx.Err() == nil {
		err := p.writeDirect(ctx, topic, key, value, seq)
		if err == nil {
			p.m.messages.WithLabelValues(topic, outcomeSent).Inc()
			return nil
		}
		switch {
		case ctx.Err() != nil:
			// The caller gave up during the write (a shutdown), not the
			// brokers: keep the message for Run or the next start
			// without claiming the brokers are down. kafka-go may yet
			// deliver it; the replay then sends a copy with the same
			// sequence number, which ingest drops.
			p.logger.Debug("publish cancelled by the caller, spooling the message", "topic", topic, "err", err)
		case permanent(err):
			p.m.writeErrors.Inc()
			p.m.messages.WithLabelValues(topic, outcomeDropped).Inc()
			return fmt.Errorf("publish: write to %s: %w", topic, err)
		default:
			p.m.writeErrors.Inc()
			p.enterSpooling(err)
		}
	}
	hs := []spool.Header{{Key: schemas.HeaderProducer, Value: []byte(seq.Producer)}, {Key: schemas.HeaderSequence, Value: seq.FormatSeq()}}
	if err := p.spool.Append(topic, key, value, hs...); err != nil {
		p.m.messages.WithLabelValues(topic, outcomeDropped).Inc()
		p.logDrop(topic, err)
		// The spool is unchanged (spool.Append), whether it reached its
		// bound or its disk is full: the number was given to no message
		// that exists. Unless the failed write stayed on disk, where the
		// next start may find and replay it under that number.
		if retried && !errors.Is(err, spool.ErrTorn) {
			p.giveBack(topic, key, seq)
		}
		return fmt.Errorf("publish: spool message for %s: %w", topic, err)
	}
	p.m.messages.WithLabelValues(topic, outcomeSpooled).Inc()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

func (p *Publisher) writeDirect(ctx context.Context, topic string, key, value []byte, seq schemas.Sequence) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	// kafka-go keeps writing a batch after WriteMessages returned early on
	// a timeout, and the caller may reuse its buffers once Publish
	// returned: hand the writer copies.
	return p.w.WriteMessages(ctx, kafka.Message{Topic: topic, Key: bytes.Clone(key), Value: bytes.Clone(value),
		Headers: []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte(seq.Producer)}, {Key: schemas.HeaderSequence, Value: seq.FormatSeq()}}})
}

// Run replays spooled messages, oldest first, until ctx is done or the
// Publisher is closed. A failed replay, whether the brokers or the spool
// failed, is retried with exponential backoff (1s to 30s); a spool failure is
// also logged, counted and shown by Ready until a replay succeeds. Run
// returns nil.
func (p *Publisher) Run(ctx context.Context) error {
	delay := p.backoffMin
	for {
		if p.spool.Len() == 0 && !p.spoolFailing() {
			select {
			case <-ctx.Done():
				return nil
			case <-p.done:
				return nil
			case <-p.wake:
			}
			continue
		}
		err := p.replayOnce(ctx)
		var serr *spoolError
		switch {
		case err == nil:
			delay = p.backoffMin
			continue
		case errors.Is(err, spool.ErrClosed):
			return nil // closed under us
		case errors.As(err, &serr):
			p.spoolFailed(serr, delay)
		default:
			p.logger.Debug("replay failed, backing off", "err", err, "backoff", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-p.done:
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, p.backoffMax)
	}
}

// spoolFailing reports whether the last replay failed in the spool: Run then
// retries even when the spool holds nothing, to finish a failed commit.
func (p *Publisher) spoolFailing() bool {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return p.spoolFailures > 0
}

// spoolFailed counts, logs (throttled) and reports a replay failed by the
// spool; Run retries it after backoff.
func (p *Publisher) spoolFailed(err *spoolError, backoff time.Duration) {
	p.m.spoolErrors.WithLabelValues(err.op).Inc()
	p.stateMu.Lock()
	p.spoolFailures++
	p.spoolFailedOp = err.op
	p.spoolCond.Report(fmt.Errorf("replay paused, retrying with backoff up to %v: %w", p.backoffMax, err))
	p.stateMu.Unlock()
	if n, ok := p.spoolLogs.Note(err.op, p.now(), 1); ok {
		p.logger.Error("spool failed, replay paused and retried", "op", err.op, "err", err.err,
			"failures", n, "retry_in", backoff, "spool_messages", p.spool.Len(), "spool_dir", p.cfg.SpoolDir)
	}
}

// spoolWorked records that spool operation op worked: after failures of op
// (of any operation, for opCommit, which ends a replay) it logs that replay
// goes on.
func (p *Publisher) spoolWorked(op string) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.spoolFailures == 0 || op != opCommit && op != p.spoolFailedOp {
		return
	}
	p.logger.Info("spool works again, replay goes on", "failed_attempts", p.spoolFailures,
		"spool_messages", p.spool.Len())
	p.spoolFailures = 0
	p.spoolCond.OK()
}

// Flush replays spooled messages until the spool is empty. It returns the
// first failure, with what was not delivered left in the spool for Run or
// the next start.
func (p *Publisher) Flush(ctx context.Context) error {
	for p.spool.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("publish: flush: %d messages still spooled: %w", p.spool.Len(), err)
		}
		if err := p.replayOnce(ctx); err != nil {
			if errors.Is(err, spool.ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("publish: flush: %d messages still spooled: %w", p.spool.Len(), err)
		}
	}
	return nil
}

// replayOnce tries to deliver the oldest spooled batch. A failure of the
// spool is a *spoolError; any other failure is the brokers'.
func (p *Publisher) replayOnce(ctx context.Context) error {
	p.replayMu.Lock()
	defer p.replayMu.Unlock()
	if p.pending == nil {
		recs, err := p.spool.PeekN(replayBatchMessages, replayBatchBytes)
		if err != nil {
			return &spoolError{op: opRead, err: err}
		}
		if len(recs) == 0 {
			// Nothing (left) to send: what a failed commit left
			// undone, or the spool skipped what it could not read.
			if err := p.spool.Persist(); err != nil {
				return &spoolError{op: opCommit, err: err}
			}
			p.spoolWorked(opCommit)
			p.replayedUpTo()
			return nil
		}
		p.spoolWorked(opRead)
		msgs := make([]kafka.Message, len(recs))
		for i, r := range recs {
			msgs[i] = kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: kafkaHeaders(r.Headers)}
		}
		p.pending = &replayBatch{records: len(recs), msgs: msgs}
	}
	b := p.pending
	if err := p.writeReplay(ctx, b); err != nil {
		p.m.writeErrors.Inc()
		p.enterSpooling(err)
		// kafka-go caches a failed cluster discovery for up to its
		// metadata TTL (6s); drop it so the next attempt dials afresh
		// and a broker that came back is seen at once.
		p.transport.CloseIdleConnections()
		return fmt.Errorf("publish: replay %d spooled messages: %w", len(b.msgs), err)
	}
	// The spool consumes the records even when it cannot record that on
	// disk: they were delivered, and sending them again now would only
	// make duplicates. Persisting is retried by the next replay.
	err := p.spool.Commit(b.records)
	p.pending = nil
	p.stateMu.Lock()
	p.replayed += b.records
	p.stateMu.Unlock()
	if err != nil {
		return &spoolError{op: opCommit, err: err}
	}
	p.spoolWorked(opCommit)
	p.replayedUpTo()
	return nil
}

// replayedUpTo logs, and reports the brokers fine, once the spool drained.
func (p *Publisher) replayedUpTo() {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.spool.Len() > 0 {
		return
	}
	// With nothing replayed the spool lost what it held (logged by the
	// spool): the brokers' state is for the next Publish to find.
	switch {
	case p.replayed == 0:
	case p.spooling:
		p.logger.Info("broker reachable again, replayed spooled messages", "messages", p.replayed)
	default:
		p.logger.Info("replayed spooled messages", "messages", p.replayed)
	}
	p.spooling, p.replayed = false, 0
	p.brokers.OK()
}

// kafkaHeaders converts a spooled record's headers (nil for records spooled
// before headers existed).
func kafkaHeaders(hs []spool.Header) []kafka.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		out[i] = kafka.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// writeReplay writes b.msgs and leaves in it the messages still to send. A
// message the brokers reject for good is dropped and counted.
func (p *Publisher) writeReplay(ctx context.Context, b *replayBatch) error {
	// A shutdown must not abandon a batch the broker may be storing right
	// now: that would replay it on the next start. The write timeout
	// bounds the wait instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.WriteTimeout)
	defer cancel()
	for len(b.msgs) > 0 {
		err := p.w.WriteMessages(ctx, b.msgs...)
		if err == nil {
			for _, m := range b.msgs {
				p.m.messages.WithLabelValues(m.Topic, outcomeReplayed).Inc()
			}
			b.msgs = nil
			return nil
		}
		var tooLarge kafka.MessageTooLargeError
		if errors.As(err, &tooLarge) {
			// Checked before anything is sent; drop it and go on.
			p.dropRejected(tooLarge.Message, err)
			b.msgs = tooLarge.Remaining
			continue
		}
		var werrs kafka.WriteErrors
		if !errors.As(err, &werrs) || len(werrs) != len(b.msgs) {
			return err
		}
		var left, suspects []kafka.Message
		var first, rejected error
		for i, e := range werrs {
			m := b.msgs[i]
			switch {
			case e == nil:
				p.m.messages.WithLabelValues(m.Topic, outcomeReplayed).Inc()
			case permanent(e):
				suspects = append(suspects, m)
				rejected = e
			default:
				left = append(left, m)
				if first == nil {
					first = e
				}
			}
		}
		switch {
		case len(suspects) == 1:
			p.dropRejected(suspects[0], rejected)
		case len(suspects) > 1:
			// The brokers judge a partition's produce request as a
			// whole, so one oversized message fails its neighbours
			// too. Send the suspects one by one, in order, to drop
			// only the culprits. A partition's messages are all
			// suspects or all in left, so order per key holds.
			rest, err := p.isolate(ctx, suspects)
			left = append(left, rest...)
			if first == nil {
				first = err
			}
		}
		b.msgs = left
		if first != nil {
			return fmt.Errorf("%d of %d messages failed: %w", len(left), len(werrs), first)
		}
	}
	return nil
}

// isolate writes msgs one at a time, dropping those the brokers reject for
// good. On any other failure it returns the messages not yet written.
func (p *Publisher) isolate(ctx context.Context, msgs []kafka.Message) ([]kafka.Message, error) {
	for i, m := range msgs {
		err := p.w.WriteMessages(ctx, m)
		switch {
		case err == nil:
			p.m.messages.WithLabelValues(m.Topic, outcomeReplayed).Inc()
		case permanent(err):
			p.dropRejected(m, err)
		default:
			return msgs[i:], err
		}
	}
	return nil, nil
}

func (p *Publisher) dropRejected(m kafka.Message, err error) {
	p.m.messages.WithLabelValues(m.Topic, outcomeDropped).Inc()
	// Rare enough (a bug or a broker config change) to log each one.
	p.logger.Warn("broker rejected spooled message, dropping it",
		"topic", m.Topic, "key", string(m.Key), "bytes", len(m.Value), "err", err)
}

// permanent reports whether err means the brokers will never take the
// message, so retrying it would block the spool forever.
func permanent(err error) bool {
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		// WriteErrors does not unwrap; it is permanent if every
		// failure in it is.
		found := false
		for _, e := range werrs {
			if e == nil {
				continue
			}
			if !permanent(e) {
				return false
			}
			found = true
		}
		return found
	}
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) {
		return true
	}
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidTopic, kafka.InvalidRecord:
			return true
		}
	}
	return false
}

func (p *Publisher) enterSpooling(err error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.spooling {
		// Readiness keeps the first failure, or the reason explain
		// found, over the bare EOF of later replays.
		return
	}
	p.spooling = true
	p.brokers.Report(fmt.Errorf("brokers unreachable, spooling: %w", err))
	p.logger.Warn("broker unreachable, spooling", "err", err, "spool_messages", p.spool.Len())
	go p.explain()
}

// explain logs why the brokers refuse connections, when they do: kafka-go's
// writer reports a refused TLS handshake or SASL login only as "EOF".
func (p *Publisher) explain() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := kafkaconn.Probe(ctx, p.sec, p.cfg.Brokers, 5*time.Second); err != nil && ctx.Err() == nil {
		p.logger.Warn("brokers refuse connections", "reason", err)
		p.stateMu.Lock()
		if p.spooling {
			p.brokers.Report(fmt.Errorf("brokers refuse connections, spooling: %w", err))
		}
		p.stateMu.Unlock()
	}
}

// Ready returns nil while messages reach the brokers, and otherwise why
// they do not and how many wait in the spool: what the collector's /-/ready
// reports.
func (p *Publisher) Ready() error {
	if err := p.health.Err(); err != nil {
		return fmt.Errorf("%w (%d messages spooled)", err, p.spool.Len())
	}
	return nil
}

// logDrop logs messages the spool refused with err at most once per
// dropLogInterval for each kind of refusal, with the number refused since
// the last log: a spool at its bound (--spool.max-bytes) and a full disk
// call for different remedies.
func (p *Publisher) logDrop(topic string, err error) {
	msg := "spool cannot be written, dropping messages"
	switch {
	case errors.Is(err, spool.ErrFull):
		msg = "spool full, dropping messages"
	case errors.Is(err, syscall.ENOSPC):
		msg = "spool disk full, dropping messages"
	}
	n, ok := p.drops.Note(msg, p.now(), 1)
	if !ok {
		return
	}
	if errors.Is(err, spool.ErrFull) {
		p.logger.Warn(msg, "topic", topic, "dropped", n,
			"spool_bytes", p.spool.Bytes(), "spool_max_bytes", p.cfg.SpoolMaxBytes)
		return
	}
	p.logger.Warn(msg, "topic", topic, "dropped", n, "err", err, "spool_dir", p.cfg.SpoolDir,
		"spool_bytes", p.spool.Bytes(), "spool_max_bytes", p.cfg.SpoolMaxBytes)
}

// Close stops Run, closes the Kafka writer and the spool. Messages still
// spooled stay on disk and are replayed by the next Publisher on the same
// directory. Close waits for writes in progress to finish or time out. It
// is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()

	p.replayMu.Lock()
	defer p.replayMu.Unlock()
	werr := p.w.Close()
	p.transport.CloseIdleConnections()
	serr := p.spool.Close()
	if err := errors.Join(werr, serr); err != nil {
		return fmt.Errorf("publish: close: %w", err)
	}
	return nil
}
