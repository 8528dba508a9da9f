package api

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/audit"
)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)  { c.ns.Add(int64(d)) }
func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.ns.Store(t.UnixNano()); return c }
func (c *fakeClock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }
func countingFetch(n *atomic.Int32, body string, release <-chan struct{}) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte(body), nil
	}
}

func TestQueryCacheSingleFlight(t *testing.T) {
	clk := newFakeClock(t0)
	c := newQueryCache(time.Second, 2, clk.now)
	var calls atomic.Int32
	release := make(chan struct{})
	fetch := countingFetch(&calls, "v1", release)
	var wg sync.WaitGroup
	got := make([]string, 50)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.get(context.Background(), "k", fetch)
			if err != nil {
				t.Error(err)
			}
			got[i] = string(b)
		}()
	}
	// Let every goroutine reach the cache before the one query ends.
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("50 concurrent misses made %d queries, want 1", n)
	}
	for i, g := range got {
		if g != "v1" {
			t.Fatalf("request %d got %q", i, g)
		}
	}
}

func TestQueryCacheAges(t *testing.T) {
	clk := newFakeClock(t0)
	c := newQueryCache(time.Second, 2, clk.now)
	var calls atomic.Int32
	get := func(body string) string {
		t.Helper()
		b, err := c.get(context.Background(), "k", countingFetch(&calls, body, nil))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	waitCalls := func(want int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); calls.Load() < want; {
			if time.Now().After(deadline) {
				t.Fatalf("%d queries, want %d", calls.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
		// and the refresh's result is stored
		for deadline := time.Now().Add(5 * time.Second); ; {
			c.mu.Lock()
			busy := c.entries["k"].flight != nil
			c.mu.Unlock()
			if !busy || time.Now().After(deadline) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	tests := []struct {
		name      string
		advance   time.Duration
		body      string // what a query would answer now
		want      string
		wantCalls int32
	}{
		{"miss queries", 0, "a", "a", 1},
		{"fresh is reused", 999 * time.Millisecond, "b", "a", 1},
		{"stale is served while one refresh runs", 2 * time.Millisecond, "c", "a", 2}, // 1.001 s old
		{"the refresh's answer is then fresh", 500 * time.Millisecond, "d", "c", 2},
		{"too old is not served", 2500 * time.Millisecond, "e", "e", 3},
		{"clock going back queries again", -time.Hour, "f", "f", 4},
	}
	for _, tt := range tests {
		clk.add(tt.advance)
		if got := get(tt.body); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		waitCalls(tt.wantCalls)
		if n := calls.Load(); n != tt.wantCalls {
			t.Errorf("%s: %d queries, want %d", tt.name, n, tt.wantCalls)
		}
	}
}

func TestQueryCacheErrorsNotKept(t *testing.T) {
	clk := newFakeClock(t0)
	c := newQueryCache(time.Second, 1, clk.now)
	boom := errors.New("boom")
	if _, err := c.get(context.Background(), "k", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	b, err := c.get(context.Background(), "k", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(b) != "ok" {
		t.Fatalf("after a failure: %q, %v; want a new query", b, err)
	}
}

func TestQueryCacheWaiterGivesUp(t *testing.T) {
	clk := newFakeClock(t0)
	c := newQueryCache(time.Second, 1, clk.now)
	release := make(chan struct{})
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.get(ctx, "k", countingFetch(&calls, "x", release))
		done <- err
	}()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v", err)
	}
	// The query itself went on and its answer serves the next request.
	close(release)
	b, err := c.get(context.Background(), "k", countingFetch(&calls, "y", nil))
	if err != nil || string(b) != "x" || calls.Load() != 1 {
		t.Fatalf("got %q, %v after %d queries; want the first query's x", b, err, calls.Load())
	}
}

func TestQueryCacheBoundsKeysAndFlights(t *testing.T) {
	clk := newFakeClock(t0)
	c := newQueryCache(time.Second, 2, clk.now)
	c.maxKeys = 10
	var running, peak atomic.Int32
	fetch := func(context.Context) ([]byte, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		return []byte("v"), nil
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.get(context.Background(), fmt.Sprint(i), fetch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 2 {
		t.Errorf("%d queries ran at once, want at most 2", p)
	}
	clk.set(t0.Add(time.Hour))
	c.get(context.Background(), "new", fetch)
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n > 10 {
		t.Errorf("%d keys kept, want at most 10", n)
	}
}

// TestActionsCached: concurrent /v1/actions requests for one query cost the
// audit table one query per TTL, and every request gets its answer.
func TestActionsCached(t *testing.T) {
	clk := newFakeClock(t0)
	var calls atomic.Int32
	release := make(chan struct{})
	d := Deps{
		Actions: func(ctx context.Context, q audit.Query) ([]audit.Record, error) {
			calls.Add(1)
			<-release
			return []audit.Record{{Cluster: q.Cluster, ID: "0001", Kind: "power_down", Target: "gpu2", DecidedAt: t0}}, nil
		},
		Cluster: "c", Now: clk.now,
	}
	s, err := New(Config{ActionsCacheTTL: time.Second}, d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make([]int, 20)
	bodies := make([]string, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/actions?limit=5", nil))
			codes[i], bodies[i] = w.Code, w.Body.String()
		}()
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("20 concurrent requests made %d audit queries, want 1", n)
	}
	for i := range codes {
		if codes[i] != 200 || !strings.Contains(bodies[i], `"target":"gpu2"`) {
			t.Fatalf("request %d: %d %s", i, codes[i], bodies[i])
		}
	}
	// A different query is its own entry.
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/actions?limit=5&kind=power_down", nil))
	if w.Code != 200 || calls.Load() != 2 {
		t.Errorf("other query: %d after %d queries, want 200 after 2", w.Code, calls.Load())
	}
}
