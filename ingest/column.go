package ingest

import (
	"math"

	"github.com/heliostat-dev/heliostat/schemas"
)

// metricColumn accumulates one Nullable metric column of gpu_samples.
type metricColumn interface {
	add(raw uint64, ok bool)
	// column returns the values as the []*T that clickhouse-go appends to a
	// Nullable column; the slice is reused across calls.
	column() any
	reset()
}

type number interface {
	uint8 | uint16 | uint32 | uint64 | float32
}

// nullable keeps values and validity side by side and builds the pointer slice
// only at insert time, so appending never allocates per row.
type nullable[T number] struct {
	vals  []T
	valid []bool
	ptrs  []*T
	conv  func(uint64) T
}

func (c *nullable[T]) add(raw uint64, ok bool) {
	c.vals = append(c.vals, c.conv(raw))
	c.valid = append(c.valid, ok)
}

func (c *nullable[T]) column() any {
	c.ptrs = c.ptrs[:0]
	for i := range c.vals {
		if c.valid[i] {
			c.ptrs = append(c.ptrs, &c.vals[i])
		} else {
			c.ptrs = append(c.ptrs, nil)
		}
	}
	return c.ptrs
}

func (c *nullable[T]) reset() {
	c.vals, c.valid = c.vals[:0], c.valid[:0]
	clear(c.ptrs)
	c.ptrs = c.ptrs[:0]
}

// newMetricColumn returns the column type that matches the metric's ClickHouse
// type in 0002_gpu_samples.sql (checked by TestSampleColumnsMatchTable).
func newMetricColumn(m schemas.Metric) metricColumn {
	info := m.Info()
	switch {
	case info.Float:
		return &nullable[float32]{conv: func(v uint64) float32 { return math.Float32frombits(uint32(v)) }}
	case info.Max <= math.MaxUint8:
		return &nullable[uint8]{conv: func(v uint64) uint8 { return uint8(v) }}
	case info.Max <= math.MaxUint16:
		return &nullable[uint16]{conv: func(v uint64) uint16 { return uint16(v) }}
	case info.Max <= math.MaxUint32:
		return &nullable[uint32]{conv: func(v uint64) uint32 { return uint32(v) }}
	default:
		return &nullable[uint64]{conv: func(v uint64) uint64 { return v }}
	}
}
