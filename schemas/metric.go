package schemas

import "strconv"

// Metric identifies one per-GPU measurement of a GPU sample (FIELDS.md). The
// numbering is part of the wire format: append new metrics at the end, never
// reorder or reuse a number.
type Metric uint8

// The metrics of a GPU sample, in wire order. Units are fixed by FIELDS.md.
const (
	GPUUtil               Metric = iota // %, "a kernel ran during the window"
	MemUtil                             // %, memory-copy utilization
	FBUsed                              // bytes
	FBFree                              // bytes
	FBTotal                             // bytes
	FBReserved                          // bytes
	PowerUsage                          // mW
	PowerLimit                          // mW, enforced limit
	Energy                              // mJ since driver load, monotonic
	GPUTemp                             // °C
	MemTemp                             // °C
	SMClock                             // MHz
	MemClock                            // MHz
	PState                              // 0–15
	ClockEventReasons                   // bitmask
	PCIeReplay                          // count
	ECCSBEVolatile                      // count
	ECCDBEVolatile                      // count
	RemappedCorrectable                 // rows
	RemappedUncorrectable               // rows
	SMActive                            // ratio 0–1 (GPM)
	SMOccupancy                         // ratio 0–1 (GPM)
	TensorActive                        // ratio 0–1 (GPM)
	DRAMActive                          // ratio 0–1 (GPM)
	Processes                           // compute processes on the GPU, each once (NVML lists one per context)

	// NumMetrics is the number of metrics; not a metric.
	NumMetrics
)

// RatioSlack is how far above 1 a ratio metric may read: rates computed in
// floating point (NVML's GPM, DCGM's profiling fields) overshoot 1 by
// rounding. The NVML collector stores such a reading as 1; ingest keeps
// what a producer sent up to 1 + RatioSlack and stores a ratio beyond it (or
// below 0) as unknown.
const RatioSlack = 1e-3

// MetricInfo describes a metric: its ClickHouse column, its unit, and whether it
// is a ratio carried as a float32 (all others are unsigned integers).
type MetricInfo struct {
	Column string
	Unit   string
	Float  bool
	// Max is the largest valid value of an integer metric; the decoder rejects
	// larger ones so that nothing is truncated silently on insert.
	Max uint64
}

const (
	maxU8  = 1<<8 - 1
	maxU16 = 1<<16 - 1
	maxU32 = 1<<32 - 1
	maxU64 = 1<<64 - 1
)

var metricInfo = [NumMetrics]MetricInfo{
	GPUUtil:               {Column: "gpu_util", Unit: "%", Max: 100},
	MemUtil:               {Column: "mem_util", Unit: "%", Max: 100},
	FBUsed:                {Column: "fb_used_bytes", Unit: "bytes", Max: maxU64},
	FBFree:                {Column: "fb_free_bytes", Unit: "bytes", Max: maxU64},
	FBTotal:               {Column: "fb_total_bytes", Unit: "bytes", Max: maxU64},
	FBReserved:            {Column: "fb_reserved_bytes", Unit: "bytes", Max: maxU64},
	PowerUsage:            {Column: "power_mw", Unit: "mW", Max: maxU32},
	PowerLimit:            {Column: "power_limit_mw", Unit: "mW", Max: maxU32},
	Energy:                {Column: "energy_mj", Unit: "mJ", Max: maxU64},
	GPUTemp:               {Column: "gpu_temp_c", Unit: "°C", Max: maxU16},
	MemTemp:               {Column: "mem_temp_c", Unit: "°C", Max: maxU16},
	SMClock:               {Column: "sm_clock_mhz", Unit: "MHz", Max: maxU32},
	MemClock:              {Column: "mem_clock_mhz", Unit: "MHz", Max: maxU32},
	PState:                {Column: "pstate", Unit: "", Max: 15},
	ClockEventReasons:     {Column: "clock_event_reasons", Unit: "bitmask", Max: maxU64},
	PCIeReplay:            {Column: "pcie_replay", Unit: "count", Max: maxU64},
	ECCSBEVolatile:        {Column: "ecc_sbe_volatile", Unit: "count", Max: maxU64},
	ECCDBEVolatile:        {Column: "ecc_dbe_volatile", Unit: "count", Max: maxU64},
	RemappedCorrectable:   {Column: "remapped_rows_correctable", Unit: "rows", Max: maxU32},
	RemappedUncorrectable: {Column: "remapped_rows_uncorrectable", Unit: "rows", Max: maxU32},
	SMActive:              {Column: "sm_active", Unit: "ratio", Float: true},
	SMOccupancy:           {Column: "sm_occupancy", Unit: "ratio", Float: true},
	TensorActive:          {Column: "tensor_active", Unit: "ratio", Float: true},
	DRAMActive:            {Column: "dram_active", Unit: "ratio", Float: true},
	Processes:             {Column: "processes", Unit: "count", Max: maxU16},
}

// Info returns the description of m. It panics if m is not a metric, which is a
// programming error, never a result of input.
func (m Metric) Info() MetricInfo { return metricInfo[m] }

// String returns the metric's column name.
func (m Metric) String() string {
	if m >= NumMetrics {
		return "metric(" + strconv.Itoa(int(m)) + ")"
	}
	return metricInfo[m].Column
}
