package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Ingester consumes the GPU topics into ClickHouse. Several Ingesters (in one
// process or many) with the same Config.Group split the partitions.
type Ingester struct {
	cfg      Config
	sec      *kafkaconn.Security
	conn     driver.Conn
	logger   *slog.Logger
	m        *metrics
	handlers []handler
	byTopic  map[string]handler
	dead     *kafka.Writer
	warn     logthrottle.Throttle // warnings by kind
	// samplePool recycles decoded sample batches between the readers, which
	// decode, and the batches, which release them.
	samplePool *sync.Pool
	// onAssigned, when set, is called once a generation's partitions are
	// recovered and reading starts (the bench times from there).
	onAssigned func()
	// health is what Ready reports: the consumer group joined, fetches
	// and ClickHouse requests not failing.
	health                             *health.Status
	groupHealth, fetchHealth, chHealth *health.Cond
	deadHealth                         *health.Cond
	// chLast is when a ClickHouse request last reported to chHealth, and
	// chByPing whether that was the idle check's ping.
	chMu     sync.Mutex
	chLast   time.Time
	chByPing bool
	// rewound holds the assigned partitions not read because they are
	// rewound (see rewind.go); rewindHealth reports them.
	rewound      rewinds
	rewindHealth *health.Cond
	// kc is the client for requests outside the consumer group (see
	// kafkaClient); kt its transport, whose connections Run closes.
	kc *kafka.Client
	kt *kafka.Transport
}

// New returns an Ingester writing through conn, which must reach the database
// in cfg.ClickHouse.Database with the schema applied.
func New(cfg Config, conn driver.Conn, logger *slog.Logger, reg prometheus.Registerer) (*Ingester, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Kafka.Logger = logger
	sec, err := cfg.Kafka.Load()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	in := &Ingester{
		cfg:     cfg,
		sec:     sec,
		conn:    conn,
		logger:  logger,
		m:       m,
		byTopic: map[string]handler{},
		warn:    logthrottle.Throttle{Every: 10 * time.Second},
		dead: &kafka.Writer{
			Addr:                   kafka.TCP(cfg.Brokers...),
			Topic:                  schemas.TopicDeadletter,
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			BatchTimeout:           10 * time.Millisecond,
			WriteTimeout:           10 * time.Second,
			Transport:              sec.Transport("heliostat-ingest"),
		},
	}
	in.kt = sec.Transport("heliostat-ingest")
	in.kc = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: in.kt}
	in.samplePool = &sync.Pool{New: func() any { return new(schemas.SampleBatch) }}
	in.handlers = in.handlersCounting(nil) // they only decode: each batch files rows with its own
	for _, h := range in.handlers {
		in.byTopic[h.topic()] = h
		in.m.rows.WithLabelValues(h.table())
		in.m.ledgerRepairs.WithLabelValues(h.table(), "ledger_written")
		in.m.ledgerRepairs.WithLabelValues(h.table(), "sent_again")
		if h.table() == "gpu_samples" {
			in.m.ledgerRepairs.WithLabelValues(h.table(), "rollup_written")
			in.m.ledgerRepairs.WithLabelValues(h.table(), "rollup_short")
		}
		if h.table() == "job_events" {
			in.m.ledgerRepairs.WithLabelValues(h.table(), "jobs_written")
			in.m.ledgerRepairs.WithLabelValues(h.table(), "job_runs_written")
		}
		in.m.seqGaps.WithLabelValues(h.topic())
		in.m.skipped.WithLabelValues(h.topic())
		// Series start at zero, so that increase() and rate() count a
		// first dead letter or resend (HeliostatDeadLetters).
		for _, o := range []string{"inserted", "duplicate", "resent", "deadletter"} {
			in.m.messages.WithLabelValues(h.topic(), o)
		}
	}
	kinds := []string{"decode", "insert", "intents", "heads", "commit", "deadletter", "fetch", "group", "ledger", "retention", "inventory", "sequences", "sequence_header"}
	for _, k := range schemas.DecodeErrorKinds() {
		kinds = append(kinds, "decode_"+k)
	}
	for _, k := range kinds {
		in.m.errors.WithLabelValues(k)
	}
	in.m.clickhouseUp.Set(1)
	in.health = health.New(time.Now)
	in.groupHealth = in.health.Add("kafka", "joining consumer group "+cfg.Group)
	// A partition reader reports failures, but nothing once it recovers
	// on an idle topic; it retries at least every few seconds.
	in.fetchHealth = in.health.AddExpiring("kafka fetch", 30*time.Second)
	in.chHealth = in.health.Add("clickhouse", "")
	in.deadHealth = in.health.Add("kafka dead letters", "")
	in.rewindHealth = in.health.Add("kafka partitions", "")
	in.rewound.by = map[string]rewind{}
	return in, nil
}

// Ready returns nil once the Ingester joined its consumer group while its
// fetches and ClickHouse requests succeed, and otherwise what is failing
// and since when: what ingest's /-/ready reports. An idle Ingester pings
// ClickHouse every Config.IdleCheck, so it notices a lost ClickHouse also
// while no data flows.
func (in *Ingester) Ready() error { return in.health.Err() }

// Security returns how the Ingester's Kafka connections are secured (nil:
// plaintext), for EnsureTopicsVia.
func (in *Ingester) Security() *kafkaconn.Security { return in.sec }

// Topics returns the topics the Ingester consumes.
func (in *Ingester) Topics() []string {
	var t []string
	for _, h := range in.handlers {
		t = append(t, h.topic())
	}
	return t
}

// Run consumes until ctx is done, then flushes the open batch while its
// generation lasts (beginning writes for at most shutdownFlushTimeout),
// commits, leaves the group and returns nil. It returns an error only when
// it cannot start.
func (in *Ingester) Run(ctx context.Context) error {
	defer in.dead.Close()
	defer in.kt.CloseIdleConnections()
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                     in.cfg.Group,
		Brokers:                in.cfg.Brokers,
		Topics:                 in.Topics(),
		StartOffset:            kafka.FirstOffset,
		HeartbeatInterval:      in.cfg.SessionTimeout / 5,
		SessionTimeout:         in.cfg.SessionTimeout,
		RebalanceTimeout:       in.cfg.SessionTimeout, // not longer: see rebalance.go
		JoinGroupBackoff:       time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 5 * time.Second,
		Timeout:                5 * time.Second,
		Dialer:                 in.sec.Dialer(5 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("ingest: create consumer group %s: %w", in.cfg.Group, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		in.retentionLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		in.idleCheckLoop(ctx)
	}()
	defer wg.Wait()
	defer group.Close()
	backoff := newBackoff(500*time.Millisecond, in.cfg.RetryMax)
	var drained <-chan struct{} // the latest generation's (see startGeneration)
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			in.m.errors.WithLabelValues("group").Inc()
			in.groupHealth.Report(fmt.Errorf("joining consumer group %s: %w", in.cfg.Group, err))
			in.warnf("group", "joining consumer group failed, retrying", "group", in.cfg.Group, "err", err)
			if !backoff.wait(ctx) {
				break
			}
			continue
		}
		backoff.reset()
		in.groupHealth.OK()
		drained = in.startGeneration(ctx, gen)
	}
	// The generation flushes its open batch while it lasts; then Close ends
	// it and leaves the group.
	if drained != nil {
		<-drained
	}
	return nil
}

// handlersCounting returns one handler per consumed topic (samples, GPU
// events, job events, allocations), which report values that do not fit
// their column to unfit (nil: not reported). The readers decode with
// in.handlers; each batch files rows with its own, which count into the
// batch (see counts).
func (in *Ingester) handlersCounting(unfit func(column string)) []handler {
	return []handler{newSampleHandler(in.samplePool, unfit), newEventHandler(), newJobEventHandler(unfit), newAllocHandler(unfit)}
}

type assignment struct {
	h         handler
	partition int32
	offset    int64
	rewound   bool // not read: see rewind
}

// item is one Kafka message on its way from a partition reader to the batch.
type item struct {
	h         handler
	partition int32
	offset    int64
	data      any      // decoded message; nil when dead
	skip      []uint32 // part keys the ledger already holds for this offset
	dead      *kafka.Message
	reason    error
	key       string           // the message key, for sequence marks; set for numbered messages
	seq       schemas.Sequence // zero when the message is not numbered
	seqErr    error            // malformed sequence headers
	at        time.Time        // when a numbered message was sent (messageTime)
	raw       head             // the message's offset, key and value, for ingest_heads
}

// startGeneration recovers and reads gen's partitions until gen ends, or
// until ctx (Run's) is done: then it flushes the open batch while gen lasts
// and waits in gen until Run closes the group, so that the replica leaves
// the group rather than joining the next generation first. The channel it
// returns is closed once the generation wrote what it is going to write.
func (in *Ingester) startGeneration(ctx context.Context, gen *kafka.Generation) <-chan struct{} {
	var as []assignment
	for topic, parts := range gen.Assignments {
		h, ok := in.byTopic[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			as = append(as, assignment{h: h, partition: int32(p.ID), offset: p.Offset})
		}
	}
	in.m.assigned.Set(float64(len(as)))
	in.logger.Info("partitions assigned", "generation", gen.ID, "partitions", len(as))
	drained := make(chan struct{})
	gen.Start(func(gctx context.Context) {
		in.consume(ctx, gctx, gen, as)
		close(drained)
		if ctx.Err() != nil {
			<-gctx.Done()
		}
	})
	return drained
}

// consume is a generation's work: recover as, read them and write what they
// hold. gctx is the generation's context, ctx Run's; reading stops when
// either ends.
func (in *Ingester) consume(ctx, gctx context.Context, gen *kafka.Generation, as []assignment) {
	rctx, cancel := context.WithCancel(gctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	in.clearRewinds()
	done, seqs, ok := in.recover(rctx, as)
	if !ok {
		return
	}
	in.m.seqMarks.Set(float64(len(seqs.marks)))
	if in.onAssigned != nil {
		in.onAssigned()
	}
	items := make(chan item, 256)
	var wg sync.WaitGroup
	var lags []*partLag
	for i, a := range as {
		if a.rewound {
			continue
		}
		lag := in.newPartLag(a)
		lags = append(lags, lag)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Deleted when the partition moves away (or is found
			// rewound), kept at shutdown (see partLag).
			defer func() { lag.stop(ctx.Err() != nil) }()
			in.read(rctx, a, done[i], items, lag)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		in.lagLoop(rctx, lags)
	}()
	in.sink(gctx, ctx.Done(), gen, items, seqs)
	cancel()
	wg.Wait()
}

// resolveStart returns the first offset and the log end of a's partition
// in Kafka, and replaces a's offset, when the group has none committed (a
// new group, offsets expired or reset, a topic created again), by the
// first one: the ledger and intents are read from there, not from offset 0,
// which after months would load every ledger row of the partition into
// memory for messages Kafka no longer holds.
func (in *Ingester) resolveStart(ctx context.Context, a *assignment) (first, end int64, err error) {
	first, end, err = logBounds(ctx, in.kafkaClient(), a.h.topic(), int(a.partition))
	if err != nil {
		return 0, 0, err
	}
	if a.offset < 0 {
		if first > 0 {
			in.logger.Info("no committed offset; starting at the partition's first offset in kafka", "topic", a.h.topic(), "partition", a.partition, "offset", first)
		}
		a.offset = first
	}
	return first, end, nil
}

// recoverWorkers is how many partitions recover works on at once. Each
// partition costs a few ClickHouse queries and Kafka requests one after
// another (5 ms on loopback, more across a network), so a rebalance that
// assigns hundreds of partitions would otherwise wait for them in turn. It
// stays below chconn's eight connections, leaving room for the rest.
const recoverWorkers = 4

// recover loads, for each assigned partition, what the ledger holds at or after
// the committed offset, once the intents recorded there are settled, and the
// stored sequence marks and producer times, retrying until ClickHouse
// answers or ctx ends. Up to recoverWorkers partitions are recovered at once.
func (in *Ingester) recover(ctx context.Context, as []assignment) ([]map[int64][]uint32, *sequences, bool) {
	done := make([]map[int64][]uint32, len(as))
	each := make([]*sequences, len(as))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(recoverWorkers, len(as)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				each[i] = newSequences()
				var ok bool
				if done[i], ok = in.recoverPartition(ctx, &as[i], each[i]); !ok {
					each[i] = nil
				}
			}
		}()
	}
	for i := range as {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, nil, false
	}
	// Each partition's marks and producers are keyed by its topic and
	// partition, so merging never overwrites.
	seqs := newSequences()
	for _, s := range each {
		maps.Copy(seqs.marks, s.marks)
		maps.Copy(seqs.producers, s.producers)
	}
	return done, seqs, true
}

// recoverPartition is recover for one partition: what the ledger holds at
// or after a's committed offset, and its sequence marks and producer times
// loaded into seqs. It marks a rewound partition (and returns no ledger). It
// retries until ClickHouse and Kafka answer; false when ctx ended first.
func (in *Ingester) recoverPartition(ctx context.Context, as *assignment, seqs *sequences) (map[int64][]uint32, bool) {
	backoff := newBackoff(200*time.Millisecond, in.cfg.RetryMax)
	// kafkaFailed counts and logs a failed Kafka request, then waits to
	// retry; false when ctx ended.
	kafkaFailed := func(msg string, err error) bool {
		in.m.errors.WithLabelValues("fetch").Inc()
		in.warnf("fetch", msg, "err", err)
		return backoff.wait(ctx)
	}
	for {
		first, end, err := in.resolveStart(ctx, as)
		if err != nil {
			if !kafkaFailed("reading a partition's offsets in kafka failed, retrying", err) {
				return nil, false
			}
			continue
		}
		a := *as
		d, err := in.loadLedger(ctx, a)
		if top := ledgerPast(d, end); err == nil && (a.offset > end || top >= 0) {
			// Before the intents: a stale one would be settled
			// against the old messages' rows.
			as.rewound = true
			in.reportRewind(rewind{topic: a.h.topic(), partition: a.partition, position: a.offset, ledger: top, first: first, end: end})
			return nil, true
		}
		var last storedHead
		if err == nil {
			last, err = in.loadHead(ctx, a)
		}
		if err == nil {
			// A log replaced and grown past both: before the intents
			// as well.
			rw, ferr := in.checkHead(ctx, a, last, first, end)
			if ferr != nil {
				if !kafkaFailed("reading the last message ingest read from kafka failed, retrying", ferr) {
					return nil, false
				}
				continue
			}
			if rw != nil {
				as.rewound = true
				in.reportRewind(*rw)
				return nil, true
			}
		}
		if err == nil {
			var landed bool
			if landed, err = in.settleIntents(ctx, a, d); err == nil && landed {
				d, err = in.loadLedger(ctx, a)
			}
		}
		unrecorded := map[prodKey]time.Time{}
		if err == nil {
			err = in.loadSequences(ctx, a, seqs, unrecorded)
		}
		if err == nil {
			err = in.sendProducers(ctx, unrecorded)
		}
		if err == nil {
			in.clickhouseReport(nil)
			if len(d) > 0 {
				in.logger.Info("resuming past rows already in clickhouse", "topic", a.h.topic(), "partition", a.partition,
					"committed_offset", a.offset, "messages_in_ledger", len(d))
			}
			return d, true
		}
		in.m.errors.WithLabelValues("ledger").Inc()
		in.clickhouseReport(fmt.Errorf("reading the ingest ledger: %w", err))
		in.warnf("ledger", "reading ingest ledger or sequence marks failed, retrying", "topic", a.h.topic(), "partition", a.partition, "err", err)
		if !backoff.wait(ctx) {
			return nil, false
		}
	}
}

// read fetches one partition from offset a.offset, decodes each message and
// hands it to the batch. It reports its position to lag.
func (in *Ingester) read(ctx context.Context, a assignment, done map[int64][]uint32, out chan<- item, lag *partLag) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        in.cfg.Brokers,
		Topic:          a.h.topic(),
		Partition:      int(a.partition),
		MinBytes:       1,
		MaxBytes:       16 << 20,
		MaxWait:        250 * time.Millisecond,
		QueueCapacity:  1024,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: 2 * time.Second,
		Dialer:         in.sec.Dialer(10 * time.Second),
	})
	defer r.Close()
	if err := r.SetOffset(a.offset); err != nil {
		in.logger.Error("cannot seek partition", "topic", a.h.topic(), "partition", a.partition, "offset", a.offset, "err", err)
		return
	}
	next := a.offset // the offset the next message should have
	for {
		// An offset past the log end (a rewound partition) makes the
		// reader wait without an error: after LogCheck without a message,
		// compare the position with the log end.
		fctx, cancel := context.WithTimeout(ctx, in.cfg.LogCheck)
		m, err := r.FetchMessage(fctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				first, end, berr := logBounds(ctx, in.kafkaClient(), a.h.topic(), int(a.partition))
				if berr == nil && next > end {
					in.reportRewind(rewind{topic: a.h.topic(), partition: a.partition, position: next, ledger: -1, first: first, end: end})
					return
				}
				if berr == nil || ctx.Err() != nil {
					continue
				}
				err = berr
			}
			in.m.errors.WithLabelValues("fetch").Inc()
			in.fetchHealth.Report(fmt.Errorf("fetching %s partition %d: %w", a.h.topic(), a.partition, err))
			in.warnf("fetch", "fetching from kafka failed, retrying", "topic", a.h.topic(), "partition", a.partition, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		lag.read(m.Offset+1, m.HighWaterMark, m.Time)
		if next >= 0 && m.Offset > next {
			// Kafka deleted them (retention) before they were read: the
			// reader moves on to the first offset it still holds.
			in.m.skipped.WithLabelValues(a.h.topic()).Add(float64(m.Offset - next))
			in.logger.Warn("messages were deleted from kafka before ingest read them (topic retention shorter than ingest's backlog)",
				"topic", a.h.topic(), "partition", a.partition, "from_offset", next, "to_offset", m.Offset-1, "messages", m.Offset-next)
		}
		next = m.Offset + 1
		it := item{h: a.h, partition: a.partition, offset: m.Offset, skip: done[m.Offset],
			raw: head{offset: m.Offset, key: m.Key, value: m.Value}}
		if it.seq, it.seqErr = sequenceOf(m.Headers); it.seq.Seq > 0 {
			it.key = string(m.Key)
			it.at = messageTime(m.Time, time.Now())
		}
		if d, err := a.h.decode(m.Value); err != nil {
			it.dead, it.reason = &m, err
		} else {
			it.data = d
		}
		select {
		case out <- it:
		case <-ctx.Done():
			return
		}
	}
}

// batch is what has been read since the last flush. It owns its handlers, so
// that one batch can fill while the previous one is being written.
type batch struct {
	handlers []handler
	byTopic  map[string]handler
	rows     int
	msgs     int
	dead     []kafka.Message
	deadFrom []deadFrom               // where each of dead came from
	next     map[string]map[int]int64 // offsets to commit
	heads    map[headKey]head         // the last message read from each partition
	seqs     map[seqKey]seqMark       // sequence marks to store before the commit
	senders  map[prodKey]time.Time    // producer times to store with them
	forget   []prodKey                // idle producers whose rows to delete after them
	forgotAt map[prodKey]time.Time    // the last message time each of forget had when it was forgotten
	blks     []block                  // the blocks with rows, gathered at flush (reused)
	counts   counts                   // what its messages add to the counters once it is stored
	first    time.Time
}

func (in *Ingester) newBatch() *batch {
	b := &batch{byTopic: map[string]handler{}, next: map[string]map[int]int64{},
		heads: map[headKey]head{}, seqs: map[seqKey]seqMark{}, senders: map[prodKey]time.Time{}, counts: newCounts()}
	b.handlers = in.handlersCounting(func(column string) { b.counts.unfit[column]++ })
	for _, h := range b.handlers {
		b.byTopic[h.topic()] = h
	}
	return b
}

func (b *batch) add(topic string, partition int32, offset int64) {
	p := b.next[topic]
	if p == nil {
		p = map[int]int64{}
		b.next[topic] = p
	}
	p[int(partition)] = offset + 1
	b.msgs++
}

func (b *batch) reset() {
	for _, h := range b.handlers {
		h.reset()
	}
	b.rows, b.msgs = 0, 0
	b.dead = b.dead[:0]
	b.deadFrom = b.deadFrom[:0]
	clear(b.next)
	clear(b.heads)
	clear(b.seqs)
	clear(b.senders)
	b.forget = b.forget[:0]
	clear(b.forgotAt)
	b.counts.reset()
}

// sink batches items by rows and by time. Full batches go to one flusher
// goroutine, which writes and commits them in order while the next batch
// fills: decoding overlaps ClickHouse's work on the previous INSERT. At most
// two batches exist, so memory stays bounded and a slow ClickHouse holds the
// readers back. ctx is the generation's: when it ends, the open batch is
// dropped (see rebalance.go). When stop is closed (shutdown), the open batch
// is flushed while the generation lasts; flushes begin no write
// shutdownFlushTimeout after stop.
func (in *Ingester) sink(ctx context.Context, stop <-chan struct{}, gen *kafka.Generation, items <-chan item, seqs *sequences) {
	// fctx is what the flushes run under: the generation, cut short
	// shutdownFlushTimeout after stop, wherever the sink is then (a flush
	// retrying a ClickHouse that is down keeps it waiting for the flusher).
	fctx, cancelFlush := context.WithCancel(ctx)
	defer cancelFlush()
	go func() {
		select {
		case <-stop:
		case <-fctx.Done():
			return
		}
		t := time.NewTimer(in.cfg.shutdownFlush)
		defer t.Stop()
		select {
		case <-t.C:
			cancelFlush()
		case <-fctx.Done():
		}
	}()
	free := make(chan *batch, 2)
	free <- in.newBatch()
	free <- in.newBatch()
	jobs := make(chan *batch)
	failed := make(chan struct{})
	flusherDone := make(chan struct{})
	go func() {
		defer close(flusherDone)
		for b := range jobs {
			ok := in.flush(fctx, gen, b)
			b.reset()
			free <- b
			if !ok {
				close(failed)
				for range jobs {
				}
				return
			}
		}
	}()
	defer func() {
		close(jobs)
		<-flusherDone
	}()
	cur := <-free
	in.sweepSequences(seqs, cur)
	// handOff gives cur to the flusher and takes a free batch; false when a
	// flush failed (the generation is over, or the shutdown's time is up).
	handOff := func() bool {
		in.m.seqMarks.Set(float64(len(seqs.marks)))
		select {
		case jobs <- cur:
		case <-failed:
			return false
		}
		select {
		case cur = <-free:
			return true
		case <-failed:
			return false
		}
	}
	// file adds a message read to the open batch.
	file := func(it item) {
		if cur.msgs == 0 {
			cur.first = time.Now()
		}
		in.addItem(cur, it, seqs)
	}
	tick := time.NewTicker(in.cfg.BatchInterval / 4)
	defer tick.Stop()
	for {
		select {
		case it := <-items:
			file(it)
			if cur.rows >= in.cfg.BatchRows && !handOff() {
				return
			}
		case <-tick.C:
			in.sweepSequences(seqs, cur)
			due := cur.msgs > 0 && time.Since(cur.first) >= in.cfg.BatchInterval
			if (due || cur.msgs == 0 && len(cur.forget) > 0) && !handOff() {
				return
			}
		case <-failed:
			return
		case <-ctx.Done():
			// The partitions may be another replica's already. Their
			// offsets in the open batch are not committed: the next
			// owner reads them again.
			cur.reset()
			return
		case <-stop:
			// Stop fetching, flush the open batch, commit, close (Run
			// leaves the group once the flusher is done). The messages
			// read before the stop and still queued join the open batch
			// first, so the flush stores them rather than leaving them to
			// be read again by the next owner.
			for queued := true; queued; {
				select {
				case it := <-items:
					file(it)
				default:
					queued = false
				}
			}
			if cur.msgs > 0 || len(cur.forget) > 0 {
				in.m.seqMarks.Set(float64(len(seqs.marks)))
				select {
				case jobs <- cur:
				case <-failed:
				}
			}
			return
		}
	}
}

// addItem files one message into b. seqs is the generation's deduplication
// state (see sequence.go); the sink goroutine alone uses it. What the message
// is counted as goes into b.counts, which flush adds to the counters once b
// is stored.
func (in *Ingester) addItem(b *batch, it item, seqs *sequences) {
	topic := it.h.topic()
	b.add(topic, it.partition, it.offset)
	b.heads[headKey{topic: topic, partition: it.partition}] = it.raw
	tc := b.counts.topic(topic)
	if it.seqErr != nil {
		// Ingested all the same, without deduplication: the rows are fine.
		b.counts.sequenceHeader++
		in.warnf("sequence_header", "message has malformed sequence headers; ingesting it without deduplication",
			"topic", topic, "partition", it.partition, "offset", it.offset, "err", it.seqErr)
	}
	if it.seq.Seq > 0 {
		k := seqKey{topic: topic, partition: it.partition, producer: it.seq.Producer, key: it.key}
		v, gap := checkSequence(seqs.marks, b.seqs, k, it.seq.Seq, it.offset)
		seqs.seen(k.prod(), it.at, b.senders)
		if gap > 0 {
			tc.gaps += gap
			in.warnf("sequence_gap", "messages missing from a producer's numbered stream: lost before kafka (spool full or rejected)",
				"topic", topic, "partition", it.partition, "offset", it.offset, "producer", it.seq.Producer, "key", it.key,
				"seq", it.seq.Seq, "missing", gap)
		}
		switch v {
		case seqResent, seqStored:
			if it.data != nil {
				it.h.release(it.data)
			}
			if v == seqStored {
				tc.duplicate++
			} else {
				tc.resent++
			}
			return
		}
	}
	if it.dead != nil {
		if slices.Contains(it.skip, deadPartKey) {
			// Dead-lettered before (see deadletter.go).
			tc.duplicate++
			return
		}
		in.deadletter(b, it)
		return
	}
	n := b.byTopic[topic].add(it.data, it.partition, it.offset, it.skip)
	b.rows += n
	if n == 0 && len(it.skip) > 0 {
		tc.duplicate++
	} else {
		tc.inserted++
	}
}

// flush writes dead letters, then the blocks' intents, then every block, then
// the sequence marks; then it counts the batch's messages (b.counts), writes
// the heads and commits the offsets. It returns false when ctx ended before everything was
// written; nothing is committed then, and the next owner of the partitions
// resumes from the intents and the ledger. Once ctx (the generation) has
// ended it begins no further write: the partitions may be another
// replica's (see rebalance.go).
func (in *Ingester) flush(ctx context.Context, gen *kafka.Generation, b *batch) bool {
	if ctx.Err() != nil {
		return false
	}
	if len(b.dead) > 0 && !in.writeDeadLetters(ctx, b) {
		return false
	}
	if b.msgs > 0 { // not a batch that only deletes forgotten producers' rows
		in.m.flushRows.Observe(float64(b.rows))
	}
	blks := b.blks[:0]
	for _, h := range b.handlers {
		for _, blk := range h.blocks() {
			if blk.rows() > 0 {
				blks = append(blks, blk)
			}
		}
	}
	b.blks = blks
	if err := in.writeIntents(ctx, blks); err != nil {
		return false
	}
	// insert checks ctx before each block; retryWrite before each write.
	for _, blk := range blks {
		start := time.Now()
		if err := in.insert(ctx, blk); err != nil {
			return false
		}
		in.m.batchSeconds.WithLabelValues(blk.table()).Observe(time.Since(start).Seconds())
		in.m.rows.WithLabelValues(blk.table()).Add(float64(blk.rows()))
	}
	for _, h := range b.handlers {
		if ctx.Err() != nil {
			return false
		}
		xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err := h.flushExtra(xctx, in.conn, in.cfg.ClickHouse.Database)
		cancel()
		if err != nil {
			in.m.errors.WithLabelValues("inventory").Inc()
			in.warnf("inventory", "updating gpu inventory failed", "err", err)
		}
	}
	// The marks go after the rows they vouch for and before the commit.
	if err := in.writeSequences(ctx, b.seqs, b.senders); err != nil {
		return false
	}
	// Rows and marks are stored: a later read of these messages finds
	// them stored (duplicate) and their numbers' gaps closed, whatever
	// happens to the heads and the commit.
	b.counts.addTo(in.m)
	if err := in.writeHeads(ctx, b.heads); err != nil {
		return false
	}
	if forget := stillIdle(b.forget, b.forgotAt, b.senders); len(forget) > 0 && ctx.Err() == nil {
		if err := in.pruneSequences(ctx, forget); err != nil {
			in.m.errors.WithLabelValues("sequences").Inc()
			in.warnf("sequences", "deleting forgotten producers' rows failed; the next partition assignment deletes them",
				"producers", len(forget), "err", err)
		}
	}
	if len(b.next) == 0 || ctx.Err() != nil {
		return ctx.Err() == nil
	}
	if err := gen.CommitOffsets(b.next); err != nil {
		in.m.errors.WithLabelValues("commit").Inc()
		in.warnf("commit", "committing offsets failed; rows are in clickhouse and the ledger covers them", "err", err)
	}
	return true
}

// insert writes one block, retrying with backoff until it lands or ctx ends.
// After a failed attempt the INSERT may have landed all the same (the
// connection died after the server committed, or the rows were written and
// the ledger view failed), so before sending again it asks ClickHouse
// (landed); it never sends a block twice without ClickHouse saying it is
// absent. When ctx ends while that is unknown, the block's intent, written
// before, lets the next owner of its partitions settle it (settleIntents).
func (in *Ingester) insert(ctx context.Context, blk block) error {
	backoff := newBackoff(100*time.Millisecond, in.cfg.RetryMax)
	uncertain := false
	resent := false // sent again because its rows landed without their rollup
	var d doubt     // set once the outcome is unknown
	for {
		var err error
		if uncertain {
			var landed, short bool
			if err = in.awaitInserts(ctx, d); err == nil {
				landed, short, err = in.landedAfter(ctx, d, resent)
			}
			if err == nil {
				if landed {
					in.clickhouseReport(nil)
					return nil
				}
				resent = resent || short
				uncertain = false
			}
		}
		if !uncertain {
			if ctx.Err() != nil {
				// The generation ended: the block's partitions may be
				// another replica's (see rebalance.go).
				return ctx.Err()
			}
			// The send is not cut short by ctx: a half-sent INSERT would leave
			// its outcome unknown just as another replica takes over, which
			// waits for it while ClickHouse lists it (awaitInserts).
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			sctx = clickhouse.Context(sctx, clickhouse.WithQueryID(insertQueryID(in.cfg.ClickHouse.Database, blk.table(), blk.partKey(), blk.origin().spans)))
			err = blk.insert(sctx, in.conn, in.cfg.ClickHouse.Database)
			cancel()
			if err == nil {
				in.clickhouseReport(nil)
				return nil
			}
			uncertain, d = true, doubtOf(blk)
		}
		in.clickhouseReport(fmt.Errorf("inserting into %s: %w", blk.table(), err))
		in.m.errors.WithLabelValues("insert").Inc()
		in.warnf("insert", "clickhouse insert failed, retrying", "table", blk.table(), "rows", blk.rows(), "err", err)
		if !backoff.wait(ctx) {
			return ctx.Err()
		}
	}
}

// warnf logs a warning of kind at most once per 10 s, with the number of
// occurrences it swallowed since the last line. Per-message paths count in
// metrics; the log only says that something is going on.
func (in *Ingester) warnf(kind, msg string, args ...any) {
	n, ok := in.warn.Note(kind, time.Now(), 1)
	if !ok {
		return
	}
	if n > 1 {
		args = append(args, "suppressed", n-1)
	}
	in.logger.Warn(msg, args...)
}
