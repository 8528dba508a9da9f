package sim

import (
	"slices"
	"strings"
)

// board is a simulated GPU model: what its samples, the GPU inventory and
// the job events of its virtual cluster say. The clocks, framebuffers and
// power limits are the public specifications of the SXM boards; the busy
// and idle power ranges are typical draws under training load and at
// idle, not measurements.
type board struct {
	gpuType   string  // the job events' GPU type: Slurm's GRES type name
	model     string  // NVML's product name and "(simulated)", as the inventory shows it
	fb        uint64  // framebuffer, bytes
	limitMW   uint64  // power limit, mW
	memMHz    uint64  // memory clock
	idleSMMHz float64 // SM clock of an idle GPU
	busySMMHz float64 // SM clock of a busy GPU at 0 % utilization ...
	spanSMMHz float64 // ... and how much it rises up to 100 %
	idleLoW   float64 // idle power: from idleLoW ...
	idleSpanW float64 // ... to idleLoW + idleSpanW, fixed per board
	busyLoW   float64 // busy power at 40 % utilization ...
	busySpanW float64 // ... and how much it rises up to 100 %
	busyMinW  float64 // busy power bounds
	busyMaxW  float64
}

// DefaultGPUType is the GPU type of a virtual cluster that names none.
const DefaultGPUType = "h100"

// boards are the GPU types the simulator models, by GPU type.
func boards() []board {
	return []board{
		{gpuType: "a100", model: "NVIDIA A100-SXM4-80GB (simulated)", fb: 80 << 30, limitMW: 400_000, memMHz: 1593,
			idleSMMHz: 210, busySMMHz: 1185, spanSMMHz: 225, idleLoW: 50, idleSpanW: 20,
			busyLoW: 150, busySpanW: 230, busyMinW: 120, busyMaxW: 395},
		{gpuType: "h100", model: "NVIDIA H100 80GB HBM3 (simulated)", fb: 80 << 30, limitMW: 700_000, memMHz: 2619,
			idleSMMHz: 345, busySMMHz: 1755, spanSMMHz: 225, idleLoW: 60, idleSpanW: 30,
			busyLoW: 250, busySpanW: 400, busyMinW: 200, busyMaxW: 690},
		{gpuType: "v100", model: "Tesla V100-SXM2-32GB (simulated)", fb: 32 << 30, limitMW: 300_000, memMHz: 877,
			idleSMMHz: 135, busySMMHz: 1305, spanSMMHz: 225, idleLoW: 40, idleSpanW: 20,
			busyLoW: 100, busySpanW: 180, busyMinW: 80, busyMaxW: 295},
	}
}

// boardOf returns the board of GPU type t ("" is DefaultGPUType), and
// whether the simulator models it.
func boardOf(t string) (board, bool) {
	if t == "" {
		t = DefaultGPUType
	}
	for _, b := range boards() {
		if b.gpuType == t {
			return b, true
		}
	}
	return board{}, false
}

// GPUTypes lists the GPU types the simulator models.
func GPUTypes() []string {
	var out []string
	for _, b := range boards() {
		out = append(out, b.gpuType)
	}
	slices.Sort(out)
	return out
}

// gpuTypeList is GPUTypes for an error message.
func gpuTypeList() string { return strings.Join(GPUTypes(), ", ") }
