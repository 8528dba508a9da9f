// Package audit is the actuator's audit log in ClickHouse (table actions,
// schemas/sql/0013_actions.sql): every action is written with outcome
// "planned" before it is sent to the scheduler (Log.Plan), and again with
// its outcome once it has been (Log.Settle); the table is a
// ReplacingMergeTree whose version puts the outcome over the plan under
// FINAL. Log.List reads the history back, newest first.
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Outcomes written to the table. The scheduler-side outcomes are those of
// actuator/adapter (applied, skipped, failed); Planned marks the row written
// before the action is sent.
const (
	Planned = "planned"
	Applied = "applied"
	Skipped = "skipped"
	Failed  = "failed"
)

// Record is one action as the audit table holds it.
type Record struct {
	Cluster string `json:"cluster"`
	// ID identifies the action; IDs sort in the order they were made.
	ID      string `json:"action_id"`
	Adapter string `json:"adapter"`
	// Kind is set_priority, power_down or power_up.
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	Partition string `json:"partition"`
	// Value is the new priority; nil for power actions.
	Value *int64 `json:"value"`
	// Previous is the priority Value replaces; nil when unknown.
	Previous *int64 `json:"previous"`
	Reason   string `json:"reason"`
	// Basis is JSON: the prediction or forecast the action rests on.
	Basis        string `json:"basis"`
	ModelVersion uint64 `json:"model_version"`
	DryRun       bool   `json:"dry_run"`
	// Outcome is planned, applied, skipped or failed.
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error"`
	DecidedAt  time.Time `json:"decided_at"`
	RecordedAt time.Time `json:"recorded_at"`
}

// Log writes and reads the actions table of one database.
type Log struct {
	conn driver.Conn
	db   string
	now  func() time.Time

	mu   sync.Mutex
	last int64 // last ID's time in ns, to keep IDs increasing
	salt string
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns the Log of database db on conn. now stamps recorded_at (nil:
// time.Now).
func New(conn driver.Conn, db string, now func() time.Time) (*Log, error) {
	if !identifier.MatchString(db) {
		return nil, fmt.Errorf("audit: database %q is not a plain identifier", db)
	}
	if now == nil {
		now = time.Now
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &Log{conn: conn, db: db, now: now, salt: hex.EncodeToString(b[:])}, nil
}

// NewID returns a new action id: the decision time in nanoseconds (made
// strictly increasing within this Log) and a per-process salt, so that two
// actuators never share one and ids sort by time.
func (l *Log) NewID(at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns := at.UnixNano()
	if ns <= l.last {
		ns = l.last + 1
	}
	l.last = ns
	return fmt.Sprintf("%019d-%s", ns, l.salt)
}

const columns = "cluster, action_id, adapter, kind, target, partition_name, value, previous, reason, basis, model_version, dry_run, outcome, error, decided_at, recorded_at"

// Plan writes recs with outcome "planned" (their Outcome and Error are
// ignored) and, once written, sets each one's RecordedAt to the row's
// recorded_at. The caller sends none of them to the scheduler unless Plan
// succeeded.
func (l *Log) Plan(ctx context.Context, recs []Record) error {
	return l.write(ctx, recs, 1)
}

// Settle writes recs with their outcomes, which must not be "planned", and,
// once written, sets each one's RecordedAt to the row's recorded_at: what
// List then reads back for the action.
func (l *Log) Settle(ctx context.Context, recs []Record) error {
	for _, r := range recs {
		if r.Outcome == "" || r.Outcome == Planned {
			return fmt.Errorf("audit: settle action %s: outcome %q", r.ID, r.Outcome)
		}
	}
	return l.write(ctx, recs, 2)
}

func (l *Log) write(ctx context.Context, recs []Record, version uint8) error {
	if len(recs) == 0 {
		return nil
	}
	batch, err := l.conn.PrepareBatch(ctx, "INSERT INTO "+l.db+".actions ("+columns+", version)")
	if err != nil {
		return fmt.Errorf("audit: prepare insert into %s.actions: %w", l.db, err)
	}
	now := l.now().UTC().Truncate(time.Second)
	for _, r := range recs {
		if r.ID == "" || r.DecidedAt.IsZero() {
			_ = batch.Abort()
			return errors.New("audit: record without id or decision time")
		}
		outcome, msg := r.Outcome, r.Error
		if version == 1 {
			outcome, msg = Planned, ""
		}
		if err := batch.Append(r.Cluster, r.ID, r.Adapter, r.Kind, r.Target, r.Partition, r.Value, r.Previous,
			r.Reason, r.Basis, r.ModelVersion, b2u(r.DryRun), outcome, msg, r.DecidedAt.UTC().Truncate(time.Second), now, version); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("audit: append action %s: %w", r.ID, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("audit: insert %d actions into %s.actions: %w", len(recs), l.db, err)
	}
	for i := range recs {
		recs[i].RecordedAt = now
	}
	return nil
}

// Query selects history.
type Query struct {
	Cluster string // required
	// Since keeps actions decided at or after it; zero: all.
	Since time.Time
	// Kind keeps one kind; "" all.
	Kind string
	// Target keeps one job or node; "" all.
	Target string
	// Limit caps the rows, newest first; 1..10000.
	Limit int
	// Before keeps actions that come after it in List's order (older, or as
	// old with a smaller id): the Next of the previous page. Zero: none.
	Before Cursor
}

// Cursor is an action's place in List's order: decided_at, then action_id,
// both descending. Its text form, "<decided_at Unix seconds>_<action_id>",
// is what the advisory API hands out as the next page's "before".
type Cursor struct {
	DecidedAt time.Time
	ID        string
}

// IsZero reports whether c marks no place.
func (c Cursor) IsZero() bool { return c.ID == "" && c.DecidedAt.IsZero() }

// Next returns the cursor of the page after recs, a List answer for q: the
// place of its last action when the page is full, else zero (no more).
func Next(q Query, recs []Record) Cursor {
	if len(recs) == 0 || len(recs) < q.Limit {
		return Cursor{}
	}
	last := recs[len(recs)-1]
	return Cursor{DecidedAt: last.DecidedAt, ID: last.ID}
}

func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.DecidedAt.Unix(), 10) + "_" + c.ID
}

// ParseCursor reads a Cursor's text form.
func ParseCursor(s string) (Cursor, error) {
	sec, id, ok := strings.Cut(s, "_")
	if !ok || id == "" {
		return Cursor{}, fmt.Errorf("audit: cursor %q: want <unix seconds>_<action id>", s)
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n < 0 || n > maxCursorUnix {
		return Cursor{}, fmt.Errorf("audit: cursor %q: %q is not Unix seconds in 0..%d", s, sec, int64(maxCursorUnix))
	}
	return Cursor{DecidedAt: time.Unix(n, 0).UTC(), ID: id}, nil
}

// maxCursorUnix is the last second a DateTime column holds (2106-02-07).
const maxCursorUnix = 1<<32 - 1

// MaxLimit is the largest Query.Limit.
const MaxLimit = 10000

// How far back from now List looks first, how much each further look
// multiplies that by, and how many looks it takes before it reads
// everything back to Query.Since: 1 h, 8 h, 64 h, 21 d, 171 d.
const (
	listFirstWindow  = time.Hour
	listWindowGrowth = 8
	listWindows      = 5
)

// List returns the actions that match q, newest first, each with its latest
// row (its outcome, or "planned").
//
// It reads windows that reach further back from now (or from q.Before)
// each time, stopping at the first that holds q.Limit actions. The table's
// sort key is (cluster, decided_at, action_id) and every read filters one
// cluster, so a window reads only its range of decided_at; both rows of an
// action share the key, so a window [from, ∞) with q.Limit actions holds
// the newest q.Limit of all.
// The usual question, the latest actions (or the next page of them), then
// costs a read of the last hour or days rather than of the whole table
// under FINAL; a filter that matches fewer than q.Limit actions costs up to
// about twice a whole read.
func (l *Log) List(ctx context.Context, q Query) ([]Record, error) {
	if q.Limit < 1 || q.Limit > MaxLimit {
		return nil, fmt.Errorf("audit: limit %d is not in 1..%d", q.Limit, MaxLimit)
	}
	top := l.now()
	if !q.Before.IsZero() {
		top = q.Before.DecidedAt
	}
	window := listFirstWindow
	for range listWindows {
		from := top.Add(-window)
		if !q.Since.IsZero() && !from.After(q.Since) {
			break
		}
		recs, err := l.list(ctx, q, from)
		if err != nil || len(recs) == q.Limit {
			return recs, err
		}
		window *= listWindowGrowth
	}
	return l.list(ctx, q, q.Since)
}

// list returns the newest q.Limit actions that match q and were decided at
// or after from (zero: all).
func (l *Log) list(ctx context.Context, q Query, from time.Time) ([]Record, error) {
	var where []string
	args := []any{q.Cluster}
	where = append(where, "cluster = ?")
	if !from.IsZero() {
		where = append(where, "decided_at >= toDateTime(?, 'UTC')")
		args = append(args, max(from.Unix(), 0))
	}
	if !q.Before.IsZero() {
		where = append(where, "(decided_at < toDateTime(?, 'UTC') OR decided_at = toDateTime(?, 'UTC') AND action_id < ?)")
		sec := max(q.Before.DecidedAt.Unix(), 0)
		args = append(args, sec, sec, q.Before.ID)
	}
	if q.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, q.Kind)
	}
	if q.Target != "" {
		where = append(where, "target = ?")
		args = append(args, q.Target)
	}
	query := fmt.Sprintf("SELECT %s FROM %s.actions FINAL WHERE %s ORDER BY decided_at DESC, action_id DESC LIMIT %d",
		columns, l.db, strings.Join(where, " AND "), q.Limit)
	rows, err := l.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: list actions: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var dry uint8
		if err := rows.Scan(&r.Cluster, &r.ID, &r.Adapter, &r.Kind, &r.Target, &r.Partition, &r.Value, &r.Previous,
			&r.Reason, &r.Basis, &r.ModelVersion, &dry, &r.Outcome, &r.Error, &r.DecidedAt, &r.RecordedAt); err != nil {
			return nil, fmt.Errorf("audit: read action: %w", err)
		}
		r.DryRun = dry == 1
		r.DecidedAt, r.RecordedAt = r.DecidedAt.UTC(), r.RecordedAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: list actions: %w", err)
	}
	return out, nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
