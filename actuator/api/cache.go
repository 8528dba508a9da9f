package api

import (
	"context"
	"sync"
	"time"
)

// queryCache keeps the answers of a slow source (the audit table) per query
// so that a burst of requests costs the source at most one query per key and
// TTL:
//
//   - an answer younger than ttl is served as is;
//   - an answer between ttl and 2·ttl old is served while one background
//     refresh replaces it (stale while revalidate), so no request waits for
//     the source and an expiry does not send every request to it at once;
//   - without an answer (or an older one) the first request queries the
//     source and the others for the same key wait for that one query
//     (single flight).
//
// At most maxFlight queries run at once whatever the keys; more wait for a
// slot or their request's end. Failed queries are not kept.
type queryCache struct {
	ttl     time.Duration
	now     func() time.Time
	timeout time.Duration // bound of a background refresh
	slots   chan struct{}
	maxKeys int

	mu      sync.Mutex
	entries map[string]*cacheEntry
}

type cacheEntry struct {
	body []byte
	at   time.Time
	// flight is non-nil while a query of this key runs; closed when it
	// ends, then body/err hold its result.
	flight *flight
}

type flight struct {
	done chan struct{}
	body []byte
	err  error
}

func newQueryCache(ttl time.Duration, maxFlight int, now func() time.Time) *queryCache {
	return &queryCache{ttl: ttl, now: now, timeout: 10 * time.Second, slots: make(chan struct{}, maxFlight),
		maxKeys: 1000, entries: map[string]*cacheEntry{}}
}

// get returns the answer for key, from fetch when it must be queried; every
// call with the same key must pass an equivalent fetch.
func (c *queryCache) get(ctx context.Context, key string, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	now := c.now()
	c.mu.Lock()
	e := c.entries[key]
	if e != nil && e.body != nil {
		age := now.Sub(e.at)
		if age >= 0 && age < c.ttl {
			b := e.body
			c.mu.Unlock()
			return b, nil
		}
		if age >= 0 && age < 2*c.ttl {
			b := e.body
			if e.flight == nil {
				go c.run(e, c.start(e), fetch)
			}
			c.mu.Unlock()
			return b, nil
		}
	}
	if e == nil {
		if len(c.entries) >= c.maxKeys {
			c.evict(now)
		}
		e = &cacheEntry{}
		c.entries[key] = e
	}
	f := e.flight
	if f == nil {
		f = c.start(e)
		go c.run(e, f, fetch)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.body, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start marks a query of e as running; c.mu is held.
func (c *queryCache) start(e *cacheEntry) *flight {
	f := &flight{done: make(chan struct{})}
	e.flight = f
	return f
}

// run queries fetch for e and publishes the result to f's waiters. The query
// is detached from the requests waiting for it (one giving up does not fail
// the others) and bounded by c.timeout.
func (c *queryCache) run(e *cacheEntry, f *flight, fetch func(context.Context) ([]byte, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
		f.body, f.err = fetch(ctx)
		<-c.slots
	case <-ctx.Done():
		f.err = ctx.Err()
	}
	at := c.now()
	c.mu.Lock()
	e.flight = nil
	if f.err == nil {
		e.body, e.at = f.body, at
	}
	c.mu.Unlock()
	close(f.done)
}

// evict drops the entries too old to be served and, when that is not
// enough, all idle ones; c.mu is held.
func (c *queryCache) evict(now time.Time) {
	for k, e := range c.entries {
		if e.flight == nil && (e.body == nil || now.Sub(e.at) >= 2*c.ttl) {
			delete(c.entries, k)
		}
	}
	if len(c.entries) >= c.maxKeys {
		for k, e := range c.entries {
			if e.flight == nil {
				delete(c.entries, k)
			}
		}
	}
}
