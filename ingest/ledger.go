package ingest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The ledger: a materialized view on each raw table writes one ingest_ledger
// row per (Kafka partition, offset, part key) of every INSERT. ClickHouse
// writes the table's part first and its views' parts after it, each committed
// on its own, so the ledger can miss an INSERT whose rows landed: the server
// died between the parts, or a view's insert failed. The INSERT then reports
// an error, and landed, asked before sending it again, finds the rows in the
// table itself. What it does then depends on the table's other views, whose
// parts may be missing too:
//
//   - gpu_events, gpu_allocations (no other view): it writes the missing
//     ledger rows, and the block is not sent again.
//   - gpu_samples (the gpu_samples_1m rollup view): the same when the rollup
//     counts every sample of the block's GPUs and minutes. When it lacks
//     exactly the block's samples, it writes the block's rollup as the view
//     would have (repairRollup), and the block is not sent again either.
//     When other rows of those GPUs and minutes lack their rollup too,
//     nothing tells the block's apart: the block is sent again, so that the
//     rollup gets it, and gpu_samples holds that block twice. Once only:
//     when the rows sent again land without their rollup too, the ledger
//     rows are written with the rollup left short (landedAfter). 18.16 runs
//     the rollup's view before the ledger's (name order), so ledger rows
//     mean a rolled-up block there; current releases run a table's views as
//     branches of one pipeline, and a block with its ledger rows can lack
//     its rollup when the rollup's view alone failed: landed checks the
//     rollup then too and repairs it as above, or says so (it does not send
//     the block again, which would store it twice with nothing to show the
//     rollup would take it).
//   - job_events (the jobs and job_runs views): it writes the missing
//     ledger rows, as above, and the jobs or job_runs rows too when a
//     view's part is missing (see repairJobs). Those parts can be missing
//     with the ledger's present as well: ClickHouse 18.16 runs a table's
//     views in the order of their names, job_events_ledger_mv before
//     job_runs_mv and jobs_mv, so for job_events landed checks both tables
//     whatever the ledger says.

// loadLedger returns, by offset, the part keys the ledger holds for a's
// partition at or after its committed offset: its table's, and deadPartKey
// for a message dead-lettered (see deadletter.go).
func (in *Ingester) loadLedger(ctx context.Context, a assignment) (map[int64][]uint32, error) {
	from := max(a.offset, 0)
	rows, err := in.conn.Query(ctx, "SELECT kafka_offset, part_key FROM "+in.cfg.ClickHouse.Database+
		".ingest_ledger WHERE tbl IN (?, ?) AND kafka_partition = ? AND kafka_offset >= ? GROUP BY kafka_offset, part_key",
		a.h.table(), deadLedgerTable(a.h.table()), uint32(a.partition), uint64(from))
	if err != nil {
		return nil, fmt.Errorf("query ingest ledger: %w", err)
	}
	defer rows.Close()
	done := map[int64][]uint32{}
	for rows.Next() {
		var off uint64
		var key uint32
		if err := rows.Scan(&off, &key); err != nil {
			return nil, fmt.Errorf("scan ingest ledger: %w", err)
		}
		done[int64(off)] = append(done[int64(off)], key)
	}
	return done, rows.Err()
}

// A doubt is a block whose INSERT failed and may have landed all the same: its
// table, part key and origin, copied, since the block itself is reused. A
// block recorded in ingest_intents gives one doubt per Kafka partition.
type doubt struct {
	table string
	key   uint32
	spans []span
	// first tells the block's first row from spans[0]'s first message
	// apart from the old log's rows at that offset after a reset (see
	// witness); nil for a doubt read from ingest_intents, whose first
	// message landed fetches from Kafka instead (firstRowInKafka).
	first *rowMatch
}

// rowMatch is a WHERE condition, with its arguments, on the identifying
// columns of one row (see block.firstRow).
type rowMatch struct {
	cond string
	args []any
}

func doubtOf(blk block) doubt {
	d := doubt{table: blk.table(), key: blk.partKey(), spans: slices.Clone(blk.origin().spans)}
	if len(d.spans) > 0 {
		if cond, args, ok := blk.firstRow(d.spans[0].partition, d.spans[0].first); ok {
			d.first = &rowMatch{cond: cond, args: args}
		}
	}
	return d
}

// insertQueryID is the query id of the INSERT of a block of table, with
// part key key, into db, whose messages start at spans' first offsets:
// "heliostat-ingest/<db>/<table>/<key>/" and "<partition>:<first>/" for
// each span. A failed INSERT may still be running on the server: the
// client gave up (a timeout, a connection reset) but the server goes on
// writing its parts, and awaitInserts finds it by this id. The id also
// keeps two replicas from running the same block's INSERT at once:
// ClickHouse refuses a query whose id is running.
func insertQueryID(db, table string, key uint32, spans []span) string {
	var b strings.Builder
	b.WriteString(insertQueryPrefix(db, table, key))
	for _, sp := range spans {
		fmt.Fprintf(&b, "%d:%d/", sp.partition, sp.first)
	}
	return b.String()
}

func insertQueryPrefix(db, table string, key uint32) string {
	return "heliostat-ingest/" + db + "/" + table + "/" + strconv.FormatUint(uint64(key), 10) + "/"
}

// awaitInserts waits until the server runs no INSERT of d's block: one of
// d's table and part key whose id names d's first span (the sender's own
// INSERT, or, settling an intent, the INSERT of the block that span was
// part of). The server's system.processes lists only its own queries: with
// several servers behind one address, an INSERT running on another one is
// not seen.
func (in *Ingester) awaitInserts(ctx context.Context, d doubt) error {
	prefix := insertQueryPrefix(in.cfg.ClickHouse.Database, d.table, d.key)
	span := fmt.Sprintf("/%d:%d/", d.spans[0].partition, d.spans[0].first)
	for waited := false; ; waited = true {
		var n uint64
		if err := in.conn.QueryRow(ctx, "SELECT count() FROM system.processes WHERE startsWith(query_id, ?) AND position(query_id, ?) > 0",
			prefix, span).Scan(&n); err != nil {
			return fmt.Errorf("look for inserts still running: %w", err)
		}
		if n == 0 {
			return nil
		}
		if !waited {
			in.logger.Info("an insert of the block is still running in clickhouse; waiting for it before checking what landed",
				"table", d.table, "part_key", d.key, "kafka_partition", d.spans[0].partition, "kafka_offset", d.spans[0].first)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// landed reports whether d's INSERT is in ClickHouse. One that completed is in
// the ledger. One whose rows were written without their ledger rows is found
// in the table by its witness message (see origin and witness); then the
// table's other views decide (see the list above): either landed writes the
// ledger rows, so that whoever owns the partitions next skips the block
// too, and reports true, or it reports false so that the block is sent
// again.
func (in *Ingester) landed(ctx context.Context, d doubt) (bool, error) {
	ok, _, err := in.landedAfter(ctx, d, false)
	return ok, err
}

// landedAfter is landed for a block that insert may have sent again already
// because its rows lacked their rollup (resent). short reports that
// gpu_samples holds the block's rows and gpu_samples_1m lacks them, which
// repairRollup could not mend. The first time, the block is sent again
// (stored false); when it was sent again already, the rollup's view failed
// twice on the same rows: sending it once more would only store the rows
// once more (a view that fails on every insert did that without end), so
// landedAfter writes the ledger rows, leaves the rollup short and says so
// (an error and the rollup_short repair).
func (in *Ingester) landedAfter(ctx context.Context, d doubt, resent bool) (stored, short bool, err error) {
	db := in.cfg.ClickHouse.Database
	p, off := d.spans[0].partition, d.spans[0].first
	var n uint64
	if err := in.conn.QueryRow(ctx, "SELECT count() FROM "+db+
		".ingest_ledger WHERE tbl = ? AND kafka_partition = ? AND kafka_offset = ? AND part_key = ?",
		d.table, uint32(p), uint64(off), d.key).Scan(&n); err != nil {
		return false, false, fmt.Errorf("query ingest ledger: %w", err)
	}
	if n > 0 {
		switch d.table {
		case "job_events":
			if err := in.repairJobs(ctx, d); err != nil {
				return false, false, err
			}
		case "gpu_samples":
			// On current releases the rollup's view may have failed alone.
			complete, err := in.repairRollup(ctx, d)
			if err != nil {
				return false, false, err
			}
			if !complete {
				in.m.ledgerRepairs.WithLabelValues(d.table, "rollup_short").Inc()
				in.logger.Error("rows were in clickhouse with their ingest ledger rows but without their gpu_samples_1m rollup (its view failed), and other rows of their GPUs and minutes lack theirs too, so the rollup could not be written for these alone; not sending them again, which would store them twice: gpu_samples_1m lacks them. Check the view (SHOW CREATE TABLE gpu_samples_1m_mv) and the server's log",
					"table", d.table, "part_key", d.key, "kafka_partition", p, "kafka_offset", off)
				return true, true, nil
			}
		}
		return true, false, nil
	}
	w, ok, err := in.witness(ctx, d)
	if err != nil {
		return false, false, err
	}
	cond := partExprs[d.table] + " = ? AND kafka_partition = ? AND kafka_offset = ?"
	args := []any{d.key, uint32(w.partition), uint64(w.first)}
	if !ok {
		// Old rows lie at every first message's offset: only the block's
		// own first row tells whether it is there.
		first := d.first
		if first == nil {
			if first, err = in.firstRowInKafka(ctx, d); err != nil {
				return false, false, err
			}
		}
		if first == nil {
			in.m.ledgerRepairs.WithLabelValues(d.table, "sent_again").Inc()
			in.logger.Warn("a failed insert's first messages lie at offsets of a reset partition whose old rows the table keeps (ingest_resets), and its first message is no longer in kafka to tell its rows from the old ones; inserting again, so the table may hold the block twice",
				"table", d.table, "part_key", d.key, "kafka_partition", p, "kafka_offset", off)
			return false, false, nil
		}
		cond = partExprs[d.table] + " = ? AND kafka_partition = ? AND kafka_offset = ? AND " + first.cond
		args = append([]any{d.key, uint32(p), uint64(off)}, first.args...)
	}
	if err := in.conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+d.table+" WHERE "+cond, args...).Scan(&n); err != nil {
		return false, false, fmt.Errorf("query %s for an unrecorded insert: %w", d.table, err)
	}
	if n == 0 {
		return false, false, nil
	}
	rows, rowArgs := d.rows()
	switch d.table {
	case "job_events":
		if err := in.repairJobs(ctx, d); err != nil {
			return false, false, err
		}
	case "gpu_samples":
		complete, err := in.repairRollup(ctx, d)
		if err != nil {
			return false, false, err
		}
		switch {
		case !complete && !resent:
			in.m.ledgerRepairs.WithLabelValues(d.table, "sent_again").Inc()
			in.logger.Warn("rows were in clickhouse without their ingest ledger rows or their gpu_samples_1m rollup; inserting them again, so gpu_samples holds them twice",
				"table", d.table, "part_key", d.key, "kafka_partition", p, "kafka_offset", off)
			return false, true, nil
		case !complete:
			short = true
			in.m.ledgerRepairs.WithLabelValues(d.table, "rollup_short").Inc()
			in.logger.Error("the gpu_samples_1m rollup view failed again on rows sent again for it; not sending them a third time: gpu_samples holds the block twice and gpu_samples_1m lacks it. Check the view (SHOW CREATE TABLE gpu_samples_1m_mv) and the server's log",
				"table", d.table, "part_key", d.key, "kafka_partition", p, "kafka_offset", off)
		}
	}
	// Messages of the spans that a previous owner wrote with their ledger
	// rows are left out, so that the ledger counts every row once.
	q := "INSERT INTO " + db + ".ingest_ledger (tbl, kafka_partition, kafka_offset, part_key, rows) " +
		"SELECT ? AS tbl, kafka_partition, kafka_offset, " + partExprs[d.table] + " AS pk, count() " +
		"FROM " + db + "." + d.table + " WHERE " + rows +
		" AND (kafka_partition, kafka_offset) NOT IN (SELECT kafka_partition, kafka_offset FROM " + db +
		".ingest_ledger WHERE tbl = ? AND part_key = ?) " +
		"GROUP BY kafka_partition, kafka_offset, pk"
	if err := in.conn.Exec(ctx, q, append(append([]any{d.table}, rowArgs...), d.table, d.key)...); err != nil {
		return false, false, fmt.Errorf("write ledger rows of an unrecorded %s insert: %w", d.table, err)
	}
	in.m.ledgerRepairs.WithLabelValues(d.table, "ledger_written").Inc()
	in.logger.Warn("rows were in clickhouse without their ingest ledger rows; wrote the ledger rows instead of inserting again",
		"table", d.table, "part_key", d.key, "kafka_partition", p, "kafka_offset", off, "rows", n)
	return true, short, nil
}

// firstRowInKafka returns what doubt.first holds for a doubt read from
// ingest_intents, which has no rows at hand: it fetches the block's first
// message from Kafka and files it into a block of its own. It returns nil
// when the message is gone (retention), no longer decodes, or gives the
// block's part key no row: then nothing tells the block's rows apart.
func (in *Ingester) firstRowInKafka(ctx context.Context, d doubt) (*rowMatch, error) {
	i := slices.IndexFunc(in.handlers, func(h handler) bool { return h.table() == d.table })
	if i < 0 || len(d.spans) == 0 {
		return nil, nil
	}
	s := d.spans[0]
	_, value, ok, err := fetchAt(ctx, in.kafkaClient(), in.handlers[i].topic(), int(s.partition), s.first)
	if err != nil || !ok {
		return nil, err
	}
	h := in.handlersCounting(nil)[i] // its unfit values are counted by the batch that stores it
	msg, err := h.decode(value)
	if err != nil {
		return nil, nil
	}
	h.add(msg, s.partition, s.first, nil)
	for _, b := range h.blocks() {
		if b.partKey() != d.key {
			continue
		}
		if cond, args, ok := b.firstRow(s.partition, s.first); ok {
			return &rowMatch{cond: cond, args: args}, nil
		}
	}
	return nil, nil
}

// witness returns the span of d whose first message's rows show whether d's
// block is in its table: the first span whose first offset no reset gave
// out again while the table kept an old message's rows of the block's part
// key there (ingest_resets). A block is one INSERT of one table partition,
// so its rows all landed or none did. It reports false when every span's
// first offset is such an offset; landed then looks for the block's first
// row by its identifying columns (doubt.first).
func (in *Ingester) witness(ctx context.Context, d doubt) (span, bool, error) {
	reused, err := in.resetRanges(ctx, d.table, d.key)
	if err != nil {
		return span{}, false, err
	}
	for _, s := range d.spans {
		if !slices.ContainsFunc(reused[s.partition], func(r [2]int64) bool { return r[0] <= s.first && s.first <= r[1] }) {
			return s, true, nil
		}
	}
	return span{}, false, nil
}

// rows returns a WHERE condition, with its arguments, that holds for the
// rows of d's block: its part key, and the offsets of its messages in each
// Kafka partition. Rows of messages between those that a previous owner wrote
// match it too.
func (d doubt) rows() (string, []any) {
	conds := make([]string, len(d.spans))
	args := []any{d.key}
	for i, s := range d.spans {
		conds[i] = "(kafka_partition = ? AND kafka_offset BETWEEN ? AND ?)"
		args = append(args, uint32(s.partition), uint64(s.first), uint64(s.last))
	}
	return partExprs[d.table] + " = ? AND (" + strings.Join(conds, " OR ") + ")", args
}

// repairRollup reports whether gpu_samples_1m counts as many samples as
// gpu_samples holds for every GPU and minute that d's rows have (a rollup
// part missing for those rows makes the first count lower), after writing
// the rollup of d's rows where it can tell they are what it lacks. That is
// when the rollup lacks exactly as many samples as d's rows hold: every
// other row of those GPUs and minutes is rolled up, so d's rows' rollup can
// be written as gpu_samples_1m_mv would have (rollupSelect), once, and the
// block need not be sent again, which would store it twice in gpu_samples.
// When other rows lack their rollup too (a view that fails on every
// insert, with other failed blocks in the same minutes not yet repaired),
// or only some of d's do, nothing is written and it reports false.
func (in *Ingester) repairRollup(ctx context.Context, d doubt) (bool, error) {
	db := in.cfg.ClickHouse.Database
	cond, args := d.rows()
	keys := "SELECT cluster, host, gpu_uuid, mig_uuid, toStartOfMinute(ts) FROM " + db + ".gpu_samples WHERE " + cond
	var rolled, raw, own uint64
	all := append(append(append(append([]any{d.key}, args...), d.key), args...), args...)
	err := in.conn.QueryRow(ctx, "SELECT (SELECT countMerge(samples) FROM "+db+".gpu_samples_1m "+
		"WHERE toYYYYMMDD(minute) = ? AND (cluster, host, gpu_uuid, mig_uuid, minute) IN ("+keys+")), "+
		"(SELECT count() FROM "+db+".gpu_samples WHERE toYYYYMMDD(ts) = ? AND (cluster, host, gpu_uuid, mig_uuid, toStartOfMinute(ts)) IN ("+keys+")), "+
		"(SELECT count() FROM "+db+".gpu_samples WHERE "+cond+")",
		all...).Scan(&rolled, &raw, &own)
	if err != nil {
		return false, fmt.Errorf("compare gpu_samples_1m with gpu_samples: %w", err)
	}
	switch {
	case rolled >= raw:
		return true, nil
	case rolled+own != raw:
		return false, nil
	}
	q := "INSERT INTO " + db + ".gpu_samples_1m (" + rollupColumns + ") SELECT " + rollupSelect +
		" FROM " + db + ".gpu_samples WHERE " + cond + " GROUP BY minute, cluster, host, gpu_uuid, mig_uuid"
	if err := in.conn.Exec(ctx, q, args...); err != nil {
		return false, fmt.Errorf("write the gpu_samples_1m rollup of an insert whose rollup view failed: %w", err)
	}
	in.m.ledgerRepairs.WithLabelValues(d.table, "rollup_written").Inc()
	in.logger.Warn("rows were in clickhouse without their gpu_samples_1m rollup (its view failed); wrote their rollup instead of inserting them again",
		"table", d.table, "part_key", d.key, "kafka_partition", d.spans[0].partition, "kafka_offset", d.spans[0].first, "rows", own)
	return true, nil
}

// rollupColumns and rollupSelect are gpu_samples_1m's columns and the
// SELECT list gpu_samples_1m_mv computes them with from gpu_samples, as
// migration 0003 defines it (TestRepairRollupAsTheView holds them to it).
const (
	rollupColumns = "minute, cluster, host, gpu_uuid, mig_uuid, samples, gpu_util_avg, gpu_util_max, mem_util_avg, " +
		"fb_used_max, power_avg, power_max, energy_max, gpu_temp_max, sm_active_avg, tensor_active_avg"
	rollupSelect = "toStartOfMinute(ts) AS minute, cluster, host, gpu_uuid, mig_uuid, countState() AS samples, " +
		"avgIfState(toFloat64(assumeNotNull(gpu_util)), isNotNull(gpu_util)) AS gpu_util_avg, " +
		"maxIfState(toFloat64(assumeNotNull(gpu_util)), isNotNull(gpu_util)) AS gpu_util_max, " +
		"avgIfState(toFloat64(assumeNotNull(mem_util)), isNotNull(mem_util)) AS mem_util_avg, " +
		"maxIfState(toFloat64(assumeNotNull(fb_used_bytes)), isNotNull(fb_used_bytes)) AS fb_used_max, " +
		"avgIfState(toFloat64(assumeNotNull(power_mw)), isNotNull(power_mw)) AS power_avg, " +
		"maxIfState(toFloat64(assumeNotNull(power_mw)), isNotNull(power_mw)) AS power_max, " +
		"maxIfState(toFloat64(assumeNotNull(energy_mj)), isNotNull(energy_mj)) AS energy_max, " +
		"maxIfState(toFloat64(assumeNotNull(gpu_temp_c)), isNotNull(gpu_temp_c)) AS gpu_temp_max, " +
		"avgIfState(toFloat64(assumeNotNull(sm_active)), isNotNull(sm_active)) AS sm_active_avg, " +
		"avgIfState(toFloat64(assumeNotNull(tensor_active)), isNotNull(tensor_active)) AS tensor_active_avg"
)

// jobsColumns and jobsSelect are the jobs views' columns and the SELECT
// list they compute them with from job_events, as migration 0007 defines
// jobs_mv and 0026 job_runs_mv (TestRepairJobsAsTheView holds them to it).
// The views copy jobsCopied as they are.
const (
	jobsCopied = "cluster, job_id, source, array_job_id, array_task_id, job_name, user, uid, " +
		"group_name, account, partition_name, qos, state, exit_code, priority, " +
		"submit_time, eligible_time, start_time, end_time, time_limit_s, node_count, " +
		"nodes, cpus, gpus, gpu_type, mem_req_bytes, command_hash, work_dir"
	jobsColumns = jobsCopied + ", last_event, updated_at, inserted_at, version"
	jobsSelect  = jobsCopied + ", event_type AS last_event, event_ts AS updated_at, inserted_at, " + jobsVersion + " AS version"
	jobsVersion = "(toUInt64(event_ts) * 1000 + event_ms) * 8 + " +
		"multiIf(event_type = 'SUBMIT', 1, event_type = 'UPDATE', 2, event_type = 'START', 3, 4)"
)

// jobViews returns the views of job_events that repairJobs stands in for: the
// table each writes, the key its rows collapse on, and the repair's action
// label. Both views compute their rows with jobsSelect.
func jobViews() []struct{ table, key, action string } {
	return []struct{ table, key, action string }{
		// jobs: one row per job id, the latest run (migration 0007).
		{"jobs", "cluster, job_id", "jobs_written"},
		// job_runs: one row per run, a requeued job's runs each with its own
		// submit time (migration 0026).
		{"job_runs", "cluster, job_id, submit_time", "job_runs_written"},
	}
}

// repairJobs writes the rows of d's block, which is in job_events, to each
// table of jobViews that lacks them: some key (a job in jobs, a run in
// job_runs) of the block has no row as recent as its latest event in the
// block. A failed INSERT can leave them out (a view's part failed, or the
// server died before it); the views are run in the order of their names on
// 18.16 (job_runs_mv before jobs_mv), perhaps at once on current ClickHouse,
// so each table is checked on its own. The rows are computed as the views
// compute them; a row a table already holds is written again with the same
// version and collapses.
func (in *Ingester) repairJobs(ctx context.Context, d doubt) error {
	db := in.cfg.ClickHouse.Database
	cond, args := d.rows()
	for _, v := range jobViews() {
		var missing uint64
		err := in.conn.QueryRow(ctx, "SELECT count() FROM (SELECT "+v.key+", max("+jobsVersion+") AS v FROM "+db+".job_events WHERE "+cond+
			" GROUP BY "+v.key+") AS e ANY LEFT JOIN (SELECT "+v.key+", max(version) AS jv FROM "+db+"."+v.table+" WHERE ("+v.key+") IN "+
			"(SELECT "+v.key+" FROM "+db+".job_events WHERE "+cond+") GROUP BY "+v.key+") AS j USING ("+v.key+") WHERE jv < v",
			append(slices.Clone(args), args...)...).Scan(&missing)
		if err != nil {
			return fmt.Errorf("compare %s with job_events for an uncertain insert: %w", v.table, err)
		}
		if missing == 0 {
			continue
		}
		if err := in.conn.Exec(ctx, "INSERT INTO "+db+"."+v.table+" ("+jobsColumns+") SELECT "+jobsSelect+" FROM "+db+".job_events WHERE "+cond, args...); err != nil {
			return fmt.Errorf("write the %s rows of an uncertain job_events insert: %w", v.table, err)
		}
		in.m.ledgerRepairs.WithLabelValues(d.table, v.action).Inc()
		in.logger.Warn("job events were in clickhouse without their rows of a jobs view; wrote the rows as the view would have",
			"table", v.table, "part_key", d.key, "kafka_partition", d.spans[0].partition, "kafka_offset", d.spans[0].first, "missing", missing)
	}
	return nil
}
