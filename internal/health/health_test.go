package health

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestStatus(t *testing.T) {
	refused := errors.New("connection refused")
	type step struct {
		do   func(s *Status, conds map[string]*Cond, clk *clock)
		want []string // substrings of Err; nil: ready
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"waiting until the first outcome", []step{
			{func(*Status, map[string]*Cond, *clock) {}, []string{"kafka: joining consumer group g"}},
			{func(_ *Status, c map[string]*Cond, _ *clock) { c["kafka"].OK() }, nil},
		}},
		{"failing since the first failure, until a success", []step{
			{func(_ *Status, c map[string]*Cond, _ *clock) { c["kafka"].OK(); c["clickhouse"].Report(refused) }, []string{"clickhouse: failing for 0s (since 2026-11-22T12:00:00Z): connection refused"}},
			{func(_ *Status, c map[string]*Cond, k *clock) {
				k.advance(40 * time.Second)
				c["clickhouse"].Report(errors.New("timeout"))
			}, []string{"clickhouse: failing for 40s (since 2026-11-22T12:00:00Z): timeout"}},
			{func(_ *Status, c map[string]*Cond, k *clock) { k.advance(time.Hour); c["clickhouse"].Report(nil) }, nil},
		}},
		{"every failing condition is named", []step{
			{func(_ *Status, c map[string]*Cond, _ *clock) {
				c["kafka"].Report(refused)
				c["clickhouse"].Report(refused)
			}, []string{"kafka: failing", "clickhouse: failing"}},
		}},
		{"an expiring failure is over once not repeated", []step{
			{func(_ *Status, c map[string]*Cond, _ *clock) { c["kafka"].OK(); c["fetch"].Report(refused) }, []string{"fetch: failing for 0s"}},
			{func(_ *Status, c map[string]*Cond, k *clock) { k.advance(20 * time.Second); c["fetch"].Report(refused) }, []string{"fetch: failing for 20s"}},
			{func(_ *Status, _ map[string]*Cond, k *clock) { k.advance(31 * time.Second) }, nil},
			// A new failure after the expiry starts a new run.
			{func(_ *Status, c map[string]*Cond, _ *clock) { c["fetch"].Report(refused) }, []string{"fetch: failing for 0s"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
			s := New(clk.now)
			conds := map[string]*Cond{
				"kafka":      s.Add("kafka", "joining consumer group g"),
				"clickhouse": s.Add("clickhouse", ""),
				"fetch":      s.AddExpiring("fetch", 30*time.Second),
			}
			for i, st := range tt.steps {
				st.do(s, conds, clk)
				err := s.Err()
				if st.want == nil {
					if err != nil {
						t.Errorf("step %d: Err() = %v; want ready", i, err)
					}
					continue
				}
				if err == nil {
					t.Errorf("step %d: Err() = nil; want %q", i, st.want)
					continue
				}
				for _, w := range st.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("step %d: Err() = %q; want it to contain %q", i, err, w)
					}
				}
			}
		})
	}
}

func TestNilStatus(t *testing.T) {
	var s *Status
	c := s.Add("kafka", "waiting")
	c.OK()
	c.Report(errors.New("x"))
	if err := s.Err(); err != nil {
		t.Errorf("nil Status: Err() = %v; want nil", err)
	}
}

// TestGauge: heliostat_ready is 1 while ready returns nil and 0 while it
// fails, asked again at each collection.
func TestGauge(t *testing.T) {
	var failing error
	g := Gauge(func() error { return failing })
	steps := []struct {
		err  error
		want float64
	}{
		{nil, 1},
		{errors.New("clickhouse: failing for 3s"), 0},
		{nil, 1},
	}
	for i, s := range steps {
		failing = s.err
		if got := testutil.ToFloat64(g); got != s.want {
			t.Errorf("step %d (ready: %v): heliostat_ready = %v; want %v", i, s.err, got, s.want)
		}
	}
}
