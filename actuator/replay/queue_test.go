package replay

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHeapQueueKeptOrder: the order a backfilling queue keeps as jobs come
// and go is the order sorting it afresh gives, and the head is its first.
func TestHeapQueueKeptOrder(t *testing.T) {
	const n = 2000
	rng := rand.New(rand.NewPCG(1, 2))
	run := make([]int, n)
	for i := range run {
		run[i] = rng.IntN(50) // many ties, broken by index
	}
	less := func(a, b int) bool { return run[a] < run[b] || (run[a] == run[b] && a < b) }
	kept, fresh := newHeapQueue(n, less, true), newHeapQueue(n, less, false)
	var in []int
	for step, next := 0, 0; step < 6000 && (next < n || len(in) > 0); step++ {
		if next < n && (len(in) == 0 || rng.IntN(3) > 0) {
			kept.push(next)
			fresh.push(next)
			in = append(in, next)
			next++
		} else {
			k := rng.IntN(len(in))
			kept.remove(in[k])
			fresh.remove(in[k])
			in = slices.Delete(in, k, k+1)
		}
		a, b := kept.sorted(0, nil), fresh.sorted(0, nil)
		if !slices.Equal(a, b) {
			t.Fatalf("step %d: kept order %v, sorted afresh %v", step, a, b)
		}
		if len(a) > 0 && kept.head(0) != a[0] {
			t.Fatalf("step %d: head %d, first in order %d", step, kept.head(0), a[0])
		}
	}
}
