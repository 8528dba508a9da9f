package sim

import (
	"errors"
	"math"
)

// Published figures of the Helios study (Hu et al., "Characterization and
// Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters",
// SC'21) that the synthetic workload follows. The figures are copied here so
// that nothing is read at run time; TestHeliosConstants checks them against
// shared/data/helios/helios_cluster_summary.csv (row "total": the four
// clusters Venus, Earth, Saturn and Uranus together, GPU jobs only) and
// shared/data/helios/venus_cluster_throughput.csv.
const (
	// heliosMedianRunS is the median run time of a GPU job, in seconds
	// (med_run_time_gpu).
	heliosMedianRunS = 206.0
	// heliosMeanRunS is the mean run time of a GPU job, in seconds
	// (avg_run_time_gpu).
	heliosMeanRunS = 6651.681
	// heliosMeanGPUs is the mean number of GPUs of a GPU job (avg_gpu_num).
	heliosMeanGPUs = 3.716
	// heliosMedianGPUs is the median number of GPUs of a GPU job
	// (med_gpu_num).
	heliosMedianGPUs = 1.0

	// Shares of GPU jobs by final state (complete_rate_gpu, cancel_rate_gpu,
	// fail_rate_gpu).
	heliosCompletedShare = 0.624
	heliosCancelledShare = 0.221
	heliosFailedShare    = 0.155

	// GPU time, in GPU·seconds, of the GPU jobs that ended in each state
	// (complete_gpu_time, cancel_gpu_time, fail_gpu_time). Cancelled jobs
	// are 22% of the jobs but hold 39% of the GPU time: they are long
	// jobs that users stop.
	heliosCompletedGPUTime = 39994296320.0
	heliosCancelledGPUTime = 30715109125.0
	heliosFailedGPUTime    = 7288334702.0
)

// venusHourOfDay is the relative rate of GPU job submissions by hour of the
// day (local time of the cluster), mean 1: column submit_gpu_job of
// venus_cluster_throughput.csv (Venus, 2020-04-01..09-28, 125,214 GPU jobs)
// summed by hour and divided by the mean. Submissions peak in the afternoon
// and bottom out at dawn, a ninefold swing.
var venusHourOfDay = [24]float64{
	0.897, 0.658, 0.600, 0.384, 0.268, 0.205, 0.187, 0.224, // 00–07
	0.374, 0.796, 1.295, 1.474, 1.164, 1.299, 1.559, 1.656, // 08–15
	1.734, 1.733, 1.282, 1.313, 1.345, 1.364, 1.149, 1.038, // 16–23
}

// venusDayOfWeek is the relative rate of GPU job submissions by day of the
// week, Sunday first (time.Weekday order), mean 1, from the same column.
var venusDayOfWeek = [7]float64{
	0.775,                             // Sunday
	1.028, 1.068, 1.282, 1.208, 0.953, // Monday–Friday
	0.684, // Saturday
}

// Modelling choices: what the published figures leave open.
const (
	// singleGPUShare is the share of GPU jobs that use one GPU. Helios
	// publishes a median of one GPU, so the share is at least one half;
	// the paper's GPU-demand CDFs put it above one half in every cluster.
	// The remaining jobs use 2, 4, … GPUs, with geometrically falling
	// shares whose ratio makes the mean heliosMeanGPUs (sizeRatio).
	singleGPUShare = 0.6
	// maxSizeExp bounds job sizes at 2^maxSizeExp GPUs before a cluster's
	// own bound (its largest virtual cluster) applies.
	maxSizeExp = 10
	// minRunS and maxRunS clamp run times: no job runs for less than a
	// second, and none for more than a week (a typical partition MaxTime).
	minRunS = 1.0
	maxRunS = 7 * 24 * 3600.0
	// userZipf is the exponent of the users' Zipf-distributed activity:
	// user k (from 1) submits in proportion to 1/k^userZipf. Helios reports
	// that a small share of users accounts for most of the GPU time.
	userZipf = 1.0
	// targetLoad is the offered load, GPU time asked for over GPU time
	// available, of the default arrival rate: busy, with queues at the
	// afternoon peak, but not saturated on average.
	targetLoad = 0.6
)

// stateShares are the final states of GPU jobs with their shares and their
// run-time scales: a state's share of GPU time over its share of jobs, so that
// cancelled jobs run longer and failed ones shorter than completed ones, as
// in Helios, while the mean over all states stays heliosMeanRunS.
type stateShare struct {
	share, scale float64
}

func heliosStates() [3]stateShare {
	total := heliosCompletedGPUTime + heliosCancelledGPUTime + heliosFailedGPUTime
	return [3]stateShare{
		{heliosCompletedShare, heliosCompletedGPUTime / total / heliosCompletedShare},
		{heliosCancelledShare, heliosCancelledGPUTime / total / heliosCancelledShare},
		{heliosFailedShare, heliosFailedGPUTime / total / heliosFailedShare},
	}
}

// sizeRatio returns r such that job sizes 2^k, k = 1..maxSizeExp, with shares
// proportional to r^k, after the singleGPUShare of one-GPU jobs, have the
// mean heliosMeanGPUs.
func sizeRatio() float64 {
	lo, hi := 0.01, 0.99
	for range 100 {
		r := (lo + hi) / 2
		if sizeMean(r, maxSizeExp) < heliosMeanGPUs {
			lo = r
		} else {
			hi = r
		}
	}
	return (lo + hi) / 2
}

// sizeShares returns the shares of job sizes 2^0 .. 2^kmax for ratio r.
func sizeShares(r float64, kmax int) []float64 {
	p := make([]float64, kmax+1)
	p[0] = singleGPUShare
	var z float64
	for k := 1; k <= kmax; k++ {
		z += math.Pow(r, float64(k))
	}
	for k := 1; k <= kmax; k++ {
		if z > 0 {
			p[k] = (1 - singleGPUShare) * math.Pow(r, float64(k)) / z
		}
	}
	if kmax == 0 {
		p[0] = 1
	}
	return p
}

func sizeMean(r float64, kmax int) float64 {
	var m float64
	for k, p := range sizeShares(r, kmax) {
		m += p * math.Exp2(float64(k))
	}
	return m
}

// durationModel is the run-time distribution: for a job ending in state s,
// clamp(scale_s · exp(mu + sigma·Z), minRunS, maxRunS) seconds, Z standard
// normal.
type durationModel struct {
	mu, sigma float64
	states    [3]stateShare
}

var errNoFit = errors.New("sim: duration model does not fit the published figures")

// fitDurations returns the duration model whose median is heliosMedianRunS
// and whose mean is heliosMeanRunS, mixture over final states and clamping
// included.
func fitDurations() (durationModel, error) {
	d := durationModel{states: heliosStates()}
	// For a fixed median, the clamped mean grows with sigma as long as it
	// stays well below maxRunS/2, which the published mean does.
	lo, hi := 0.1, 5.0
	for range 100 {
		d.sigma = (lo + hi) / 2
		d.mu = d.muForMedian(heliosMedianRunS)
		if d.mean() < heliosMeanRunS {
			lo = d.sigma
		} else {
			hi = d.sigma
		}
	}
	if math.Abs(d.mean()/heliosMeanRunS-1) > 1e-6 || math.Abs(d.cdf(heliosMedianRunS)-0.5) > 1e-6 {
		return d, errNoFit
	}
	return d, nil
}

// muForMedian returns mu such that the mixture's median is m (for d.sigma).
func (d durationModel) muForMedian(m float64) float64 {
	lo, hi := -20.0, 40.0
	for range 200 {
		d.mu = (lo + hi) / 2
		if d.cdf(m) > 0.5 {
			lo = d.mu
		} else {
			hi = d.mu
		}
	}
	return d.mu
}

// cdf returns P(run time ≤ x) for minRunS ≤ x < maxRunS.
func (d durationModel) cdf(x float64) float64 {
	var p float64
	for _, s := range d.states {
		p += s.share * normCDF((math.Log(x/s.scale)-d.mu)/d.sigma)
	}
	return p
}

// mean returns the expected clamped run time.
func (d durationModel) mean() float64 {
	var m float64
	for _, s := range d.states {
		m += s.share * clampedLogNormalMean(d.mu+math.Log(s.scale), d.sigma, minRunS, maxRunS)
	}
	return m
}

// clampedLogNormalMean returns E[clamp(X, a, b)] for ln X ~ N(mu, sigma²).
func clampedLogNormalMean(mu, sigma, a, b float64) float64 {
	za, zb := (math.Log(a)-mu)/sigma, (math.Log(b)-mu)/sigma
	inner := math.Exp(mu+sigma*sigma/2) * (normCDF(zb-sigma) - normCDF(za-sigma))
	return a*normCDF(za) + inner + b*(1-normCDF(zb))
}

func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
