package qssf

import (
	"container/heap"
	"slices"
	"time"
)

// Item is a job held by a Queue.
type Item struct {
	Job
	// Tag is the caller's: e.g. an index into its own table of jobs.
	Tag int

	key float64 // Config.Key, cached
	seq uint64  // push order: the last tie-break, as Rank's input order
	i   int     // index in the heap; -1 when out
}

// Queue holds pending jobs in the order of Config.Rank, kept up to date
// incrementally: Push, Remove and Update cost O(log n), Head O(1), where
// Rank sorts the whole queue each time. Simulators with queues of thousands
// of jobs use it. Create it with NewQueue. A Queue is not safe for
// concurrent use.
//
// The order is Rank's: by Config.Key, then submission, then the order of
// Push. It does not change with time, so a heap keeps it.
type Queue struct {
	cfg Config
	h   itemHeap
	seq uint64
}

// NewQueue returns an empty Queue ordering by cfg.
func NewQueue(cfg Config) *Queue { return &Queue{cfg: cfg} }

// Len returns how many jobs the queue holds.
func (q *Queue) Len() int { return len(q.h) }

// Push adds j with the caller's tag and returns its item, the handle for
// Remove and Update.
func (q *Queue) Push(j Job, tag int) *Item {
	q.seq++
	it := &Item{Job: j, Tag: tag, seq: q.seq}
	it.key = q.cfg.Key(&it.Job)
	heap.Push(&q.h, it)
	return it
}

func (q *Queue) holds(it *Item) bool { return it.i >= 0 && it.i < len(q.h) && q.h[it.i] == it }

// Remove takes it out of the queue; removing an item that is not in the
// queue does nothing.
func (q *Queue) Remove(it *Item) {
	if !q.holds(it) {
		return
	}
	heap.Remove(&q.h, it.i)
	it.i = -1
}

// Update sets it's predicted run time and moves it to its new place.
func (q *Queue) Update(it *Item, predicted time.Duration) {
	it.Predicted = predicted
	it.key = q.cfg.Key(&it.Job)
	if q.holds(it) {
		heap.Fix(&q.h, it.i)
	}
}

// Head returns the job that goes first, or nil when the queue is empty.
func (q *Queue) Head() *Item {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}

// Items appends the queue's jobs to dst, in no particular order, and
// returns it.
func (q *Queue) Items(dst []*Item) []*Item { return append(dst, q.h...) }

// Sorted appends the queue's jobs in order to dst and returns it. It costs a
// sort of the whole queue.
func (q *Queue) Sorted(dst []*Item) []*Item {
	start := len(dst)
	dst = append(dst, q.h...)
	slices.SortFunc(dst[start:], func(a, b *Item) int { return itemCompare(a, b) })
	return dst
}

func itemCompare(a, b *Item) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	}
	if c := a.Submit.Compare(b.Submit); c != 0 {
		return c
	}
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

type itemHeap []*Item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return itemCompare(h[i], h[j]) < 0 }
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *itemHeap) Push(x any) {
	it := x.(*Item)
	it.i = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
