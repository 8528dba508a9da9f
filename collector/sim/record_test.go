package sim

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// recorder is a collector.Publisher that keeps what it is given.
type recorder struct {
	mu   sync.Mutex
	msgs []message
}

type message struct {
	topic      string
	key, value []byte
}

func (r *recorder) Publish(_ context.Context, topic string, key, value []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, message{topic, slices.Clone(key), slices.Clone(value)})
	return nil
}

// sample is one decoded GPU sample with its batch's identity.
type sample struct {
	cluster, host string
	gpu           schemas.GPU
	s             schemas.Sample
}

// published is everything a recorder got, decoded.
type published struct {
	events  []schemas.JobEvent
	allocs  []schemas.Alloc
	samples []sample
	// last holds each job's latest event.
	last map[string]schemas.JobEvent
}

func (r *recorder) decode(t *testing.T, cluster string) published {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := published{last: map[string]schemas.JobEvent{}}
	for i, m := range r.msgs {
		switch m.topic {
		case schemas.TopicJobEvents:
			var b schemas.JobEventBatch
			if err := schemas.DecodeJobEventBatch(m.value, &b); err != nil {
				t.Fatalf("message %d: decode job events: %v", i, err)
			}
			if b.Cluster != cluster || b.Source != schemas.SourceSim {
				t.Fatalf("message %d: cluster %q source %v; want %q sim", i, b.Cluster, b.Source, cluster)
			}
			for _, e := range b.Events {
				if string(m.key) != string(schemas.JobKey(cluster, e.JobID)) {
					t.Fatalf("message %d: key %q holds job %s", i, m.key, e.JobID)
				}
				p.events = append(p.events, e)
				p.last[e.JobID] = e
			}
		case schemas.TopicAllocations:
			var b schemas.AllocBatch
			if err := schemas.DecodeAllocBatch(m.value, &b); err != nil {
				t.Fatalf("message %d: decode allocations: %v", i, err)
			}
			for _, a := range b.Allocs {
				if string(m.key) != string(schemas.JobKey(cluster, a.JobID)) {
					t.Fatalf("message %d: key %q holds an allocation of job %s", i, m.key, a.JobID)
				}
			}
			p.allocs = append(p.allocs, b.Allocs...)
		case schemas.TopicGPUSamples:
			var b schemas.SampleBatch
			if err := schemas.DecodeSampleBatch(m.value, &b); err != nil {
				t.Fatalf("message %d: decode samples: %v", i, err)
			}
			if string(m.key) != b.Host || b.Cluster != cluster {
				t.Fatalf("message %d: key %q, host %q, cluster %q", i, m.key, b.Host, b.Cluster)
			}
			for _, s := range b.Samples {
				p.samples = append(p.samples, sample{b.Cluster, b.Host, b.GPUs[s.GPU], s})
			}
		default:
			t.Fatalf("message %d: unexpected topic %q", i, m.topic)
		}
	}
	return p
}

// allocKey identifies an allocation interval: the record that closes it
// replaces the one that opened it.
type allocKey struct {
	host  string
	gpu   int64
	job   string
	start int64
}

// interval is an allocation as ClickHouse would keep it: the latest record of
// each key.
type interval struct {
	host, uuid, job string
	gpu             int64
	start, end      int64 // ms; end 0 while open
}

func (p published) intervals() []interval {
	idx := map[allocKey]int{}
	var out []interval
	for _, a := range p.allocs {
		k := allocKey{a.Host, a.GPUIndex, a.JobID, a.StartMillis}
		iv := interval{a.Host, a.GPUUUID, a.JobID, a.GPUIndex, a.StartMillis, a.EndMillis}
		if i, ok := idx[k]; ok {
			out[i] = iv
			continue
		}
		idx[k] = len(out)
		out = append(out, iv)
	}
	return out
}

// checkConsistent checks that samples agree with allocations and job events:
// a sample shows load exactly when an allocation interval of a job running
// at that time covers its GPU (start ≤ ts < end), and allocations agree with
// the jobs' START and END events.
func checkConsistent(t *testing.T, p published) {
	t.Helper()
	opened, closed := map[string]int64{}, map[string]int64{}
	for _, a := range p.allocs {
		if a.EndMillis == 0 {
			opened[a.JobID]++
		} else {
			closed[a.JobID]++
		}
		if a.Source != schemas.AllocSim {
			t.Errorf("allocation of job %s: source %v", a.JobID, a.Source)
		}
	}
	for id, e := range p.last {
		if e.StartMillis == 0 {
			continue
		}
		if opened[id] != e.GPUs || (e.Type == schemas.JobEnd && closed[id] != e.GPUs) {
			t.Errorf("job %s of %d GPUs: %d allocations opened, %d closed", id, e.GPUs, opened[id], closed[id])
		}
	}
	byGPU := map[string][]interval{}
	for _, iv := range p.intervals() {
		if iv.uuid == "" || iv.host == "" || iv.gpu < 0 {
			t.Errorf("allocation %+v lacks host, GPU index or UUID", iv)
		}
		byGPU[iv.host+"/"+iv.uuid] = append(byGPU[iv.host+"/"+iv.uuid], iv)
		e, ok := p.last[iv.job]
		if !ok {
			t.Errorf("allocation of unknown job %s", iv.job)
			continue
		}
		if iv.start != e.StartMillis || iv.end != e.EndMillis {
			t.Errorf("allocation of job %s on %s/%d: [%d, %d]; job ran [%d, %d]", iv.job, iv.host, iv.gpu, iv.start, iv.end, e.StartMillis, e.EndMillis)
		}
		if !slices.Contains(e.Nodes, iv.host) {
			t.Errorf("allocation of job %s on %s; job nodes %v", iv.job, iv.host, e.Nodes)
		}
	}
	for _, s := range p.samples {
		util, ok := s.s.Uint(schemas.GPUUtil)
		if !ok {
			t.Fatalf("sample of %s/%d has no utilization", s.host, s.gpu.Index)
		}
		ts := s.s.TSMillis
		var holder string
		for _, iv := range byGPU[s.host+"/"+s.gpu.UUID] {
			if iv.gpu == int64(s.gpu.Index) && iv.start <= ts && (iv.end == 0 || ts < iv.end) {
				if holder != "" {
					t.Errorf("%s/%d at %d held by jobs %s and %s", s.host, s.gpu.Index, ts, holder, iv.job)
				}
				holder = iv.job
			}
		}
		power, _ := s.s.Uint(schemas.PowerUsage)
		switch {
		case holder != "" && (util < 40 || util > 100 || power < 200_000):
			t.Errorf("%s/%d at %d held by job %s shows %d%% %d mW", s.host, s.gpu.Index, ts, holder, util, power)
		case holder == "" && (util != 0 || power > 95_000):
			t.Errorf("%s/%d at %d is free but shows %d%% %d mW", s.host, s.gpu.Index, ts, util, power)
		}
	}
}
