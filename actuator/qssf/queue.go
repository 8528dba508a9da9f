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

	svc    float64 // Job.Service(), cached
	seq    uint64  // push order: the last tie-break, as Rank's input order
	si, fi int     // indexes in the service and submission heaps; -1 when out
}

// Queue holds pending jobs in the order of Config.Rank, kept up to date
// incrementally: Push, Remove and Update cost O(log n) and Head O(log n)
// amortized, where Rank sorts the whole queue each time. Simulators with
// queues of thousands of jobs use it. The zero Queue is not usable; call
// NewQueue. A Queue is not safe for concurrent use.
//
// The order is Rank's: jobs aged at now first, oldest submission first; then
// the others by service time, then submission; then the order of Push.
type Queue struct {
	cfg Config
	svc svcHeap // every item, by service time
	sub subHeap // every item, by submission
	seq uint64
}

// NewQueue returns an empty Queue ordering by cfg.
func NewQueue(cfg Config) *Queue { return &Queue{cfg: cfg} }

// Len returns how many jobs the queue holds.
func (q *Queue) Len() int { return len(q.svc) }

// Push adds j with the caller's tag and returns its item, the handle for
// Remove and Update.
func (q *Queue) Push(j Job, tag int) *Item {
	q.seq++
	it := &Item{Job: j, Tag: tag, svc: j.Service(), seq: q.seq}
	heap.Push(&q.svc, it)
	heap.Push(&q.sub, it)
	return it
}

// Remove takes it out of the queue; removing an item that is not in the
// queue does nothing.
func (q *Queue) Remove(it *Item) {
	if it.si < 0 || it.si >= len(q.svc) || q.svc[it.si] != it {
		return
	}
	heap.Remove(&q.svc, it.si)
	heap.Remove(&q.sub, it.fi)
	it.si, it.fi = -1, -1
}

// Update sets it's predicted run time and moves it to its new place.
func (q *Queue) Update(it *Item, predicted time.Duration) {
	it.Predicted = predicted
	it.svc = it.Service()
	if it.si >= 0 && it.si < len(q.svc) && q.svc[it.si] == it {
		heap.Fix(&q.svc, it.si)
	}
}

// Head returns the job that goes first at now, or nil when the queue is
// empty.
func (q *Queue) Head(now time.Time) *Item {
	if len(q.sub) == 0 {
		return nil
	}
	// The oldest submission is aged if any job is; it goes first then.
	if old := q.sub[0]; q.cfg.Aged(now, old.Submit) {
		return old
	}
	return q.svc[0]
}

// Sorted appends the queue's jobs in order at now to dst and returns it.
// It costs a sort of the whole queue.
func (q *Queue) Sorted(now time.Time, dst []*Item) []*Item {
	start := len(dst)
	dst = append(dst, q.svc...)
	slices.SortFunc(dst[start:], func(a, b *Item) int { return q.compare(now, a, b) })
	return dst
}

func (q *Queue) compare(now time.Time, a, b *Item) int {
	if c := q.cfg.Compare(now, &a.Job, &b.Job); c != 0 {
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

// svcHeap orders by service time, submission, push order.
type svcHeap []*Item

func (h svcHeap) Len() int { return len(h) }
func (h svcHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.svc != b.svc {
		return a.svc < b.svc
	}
	if c := a.Submit.Compare(b.Submit); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (h svcHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].si, h[j].si = i, j
}
func (h *svcHeap) Push(x any) {
	it := x.(*Item)
	it.si = len(*h)
	*h = append(*h, it)
}
func (h *svcHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// subHeap orders by submission, push order.
type subHeap []*Item

func (h subHeap) Len() int { return len(h) }
func (h subHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if c := a.Submit.Compare(b.Submit); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}
func (h subHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].fi, h[j].fi = i, j
}
func (h *subHeap) Push(x any) {
	it := x.(*Item)
	it.fi = len(*h)
	*h = append(*h, it)
}
func (h *subHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
