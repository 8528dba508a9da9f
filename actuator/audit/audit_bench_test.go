package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkList measures GET /v1/actions' query on an audit table of
// 2,000,000 actions over 162 days (one every 7 s, each with its plan and
// outcome rows): "latest" is List with no Since, as an operator or
// dashboard asks; "whole" the single read of the whole table under FINAL
// that List did before it read in windows; "target" a filter that matches a
// few actions a day; "page_100d" the page after an action 100 days old
// (before=, as a client paging through history asks).
func BenchmarkList(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	const n = 2_000_000
	end := time.Now().UTC().Truncate(time.Second)
	const step = 7 // seconds between actions
	for version := 1; version <= 2; version++ {
		q := fmt.Sprintf(`INSERT INTO %s.actions (%s, version)
SELECT 'c', concat('bench-', toString(1000000000 + number)), 'slurm', if(number %% 50 = 0, 'power_down', 'set_priority'),
  concat('job', toString(number %% 3000)), 'gpu', toInt64(number %% 1000), NULL, 'qssf rank 12 of 2000', '{"predicted_s":10800}', 7, 1,
  if(%d = 1, 'planned', 'skipped'), '', toDateTime(%d + number * %d), toDateTime(%d + number * %d), %d
FROM system.numbers LIMIT %d`, ch.Database, columns, version, end.Unix()-(n-1)*step, step, end.Unix()-(n-1)*step, step, version, n)
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("fill actions: %v", err)
		}
	}
	l, err := New(conn, ch.Database, func() time.Time { return end })
	if err != nil {
		b.Fatal(err)
	}
	start := end.Add(-(n - 1) * step * time.Second)
	k := int64(n - 100*24*3600/step) // the action 100 days old
	page := Cursor{DecidedAt: start.Add(time.Duration(k*step) * time.Second), ID: fmt.Sprintf("bench-%d", 1000000000+k)}
	for _, tc := range []struct {
		name  string
		q     Query
		whole bool
		top   time.Time // when the newest action of the answer was decided (zero: not checked)
	}{
		{"latest", Query{Cluster: "c", Limit: 100}, false, end},
		{"whole", Query{Cluster: "c", Limit: 100}, true, end},
		{"target", Query{Cluster: "c", Limit: 100, Target: "job17"}, false, time.Time{}},
		{"page_100d", Query{Cluster: "c", Limit: 100, Before: page}, false, page.DecidedAt.Add(-step * time.Second)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var recs []Record
			var err error
			for b.Loop() {
				if tc.whole {
					recs, err = l.list(ctx, tc.q, time.Time{})
				} else {
					recs, err = l.List(ctx, tc.q)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if len(recs) != tc.q.Limit || recs[0].Outcome != Skipped || !tc.top.IsZero() && !recs[0].DecidedAt.Equal(tc.top) {
				b.Fatalf("%d actions (%+v); want %d, the newest decided at %v and skipped", len(recs), recs, tc.q.Limit, tc.top)
			}
		})
	}
}
