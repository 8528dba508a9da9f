package replay

import (
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/qssf"
)

// queue is a VC's pending jobs in policy order.
type queue interface {
	push(j int)
	// head returns the job that goes first at now, or -1.
	head(now int64) int
	remove(j int)
	// sorted appends the jobs in order at now to dst.
	sorted(now int64, dst []int) []int
}

// heapQueue orders jobs by a fixed less: FIFO and SJF.
type heapQueue struct {
	h    []int
	pos  []int32             // by job: index in h, -1 when out
	less func(a, b int) bool // a strict total order
	// ord, kept only when asked for (backfill, which walks the whole
	// queue in order at every pass), holds the jobs in order: an insertion
	// or removal moves part of it (a memmove) instead of every pass
	// sorting the queue again.
	ord      []int
	keepSort bool
}

func newHeapQueue(n int, less func(a, b int) bool, keepSorted bool) *heapQueue {
	q := &heapQueue{pos: make([]int32, n), less: less, keepSort: keepSorted}
	for i := range q.pos {
		q.pos[i] = -1
	}
	return q
}

func (q *heapQueue) push(j int) {
	q.pos[j] = int32(len(q.h))
	q.h = append(q.h, j)
	q.up(len(q.h) - 1)
	if q.keepSort {
		k, _ := slices.BinarySearchFunc(q.ord, j, q.cmp)
		q.ord = slices.Insert(q.ord, k, j)
	}
}

func (q *heapQueue) cmp(a, b int) int {
	if q.less(a, b) {
		return -1
	}
	if q.less(b, a) {
		return 1
	}
	return 0
}

func (q *heapQueue) head(int64) int {
	if len(q.h) == 0 {
		return -1
	}
	return q.h[0]
}

func (q *heapQueue) remove(j int) {
	i := int(q.pos[j])
	if i < 0 {
		return
	}
	last := len(q.h) - 1
	q.swap(i, last)
	q.h = q.h[:last]
	q.pos[j] = -1
	if i < last {
		q.down(i)
		q.up(i)
	}
	if q.keepSort {
		if k, ok := slices.BinarySearchFunc(q.ord, j, q.cmp); ok {
			q.ord = slices.Delete(q.ord, k, k+1)
		}
	}
}

func (q *heapQueue) sorted(_ int64, dst []int) []int {
	if q.keepSort {
		return append(dst, q.ord...)
	}
	start := len(dst)
	dst = append(dst, q.h...)
	slices.SortFunc(dst[start:], q.cmp)
	return dst
}

func (q *heapQueue) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.pos[q.h[i]], q.pos[q.h[j]] = int32(i), int32(j)
}

func (q *heapQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(q.h[i], q.h[p]) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *heapQueue) down(i int) {
	n := len(q.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(q.h[r], q.h[l]) {
			m = r
		}
		if !q.less(q.h[m], q.h[i]) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// qssfQueue is actuator/qssf's Queue: the QSSF order itself.
type qssfQueue struct {
	e     *engine
	q     *qssf.Queue
	items []*qssf.Item
}

// push predicts j's run time from what has ended so far and queues it.
func (q *qssfQueue) push(j int) {
	job := &q.e.w.Jobs[j]
	q.e.items[j] = q.q.Push(qssf.Job{
		ID: job.ID, User: job.User, GPUs: job.GPUs, Submit: time.Unix(job.Submit, 0),
		Predicted: q.e.pred.predict(j),
	}, j)
}

func (q *qssfQueue) head(now int64) int {
	if it := q.q.Head(); it != nil {
		return it.Tag
	}
	return -1
}

func (q *qssfQueue) remove(j int) { q.q.Remove(q.e.items[j]) }

func (q *qssfQueue) sorted(now int64, dst []int) []int {
	q.items = q.q.Sorted(q.items[:0])
	for _, it := range q.items {
		dst = append(dst, it.Tag)
	}
	return dst
}
