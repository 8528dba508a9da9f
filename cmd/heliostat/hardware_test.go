package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/nvml"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// Environment of TestHardwareCollectorCommand: a GPU program the caller
// started and may be ended, and the Slurm job id in its environment.
const (
	envGPUPID = "HELIOSTAT_TEST_GPU_PID"
	envGPUJob = "HELIOSTAT_TEST_GPU_JOB"
)

// TestHardwareCollectorCommand runs `heliostat collector --source nvml` as an
// operator would, on the host's real GPUs, into an in-process Kafka-protocol
// broker: it must become ready, publish one sample per GPU and tick, and, with
// HELIOSTAT_TEST_GPU_PID naming a GPU program started with
// SLURM_JOB_ID=$HELIOSTAT_TEST_GPU_JOB in its environment, attribute that
// program's GPU to the job, then close the interval once the test ends the
// program (SIGTERM), at the last poll that saw it. Skipped where libnvidia-ml.so.1 cannot be loaded.
func TestHardwareCollectorCommand(t *testing.T) {
	probe, err := nvml.New(gonvml.New(), slog.New(slog.DiscardHandler), nil)
	if errors.Is(err, gonvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Skip("no NVIDIA driver (libnvidia-ml.so.1 not found); hardware test skipped")
	}
	if err != nil {
		t.Fatalf("nvml.New(real NVML) = %v", err)
	}
	gpus := probe.GPUs()
	if err := probe.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if len(gpus) == 0 {
		t.Fatal("nvml.New(real NVML) found no GPUs")
	}
	pid, job := 0, os.Getenv(envGPUJob)
	if v := os.Getenv(envGPUPID); v != "" {
		if pid, err = strconv.Atoi(v); err != nil || pid <= 0 {
			t.Fatalf("%s=%q: not a process id", envGPUPID, v)
		}
	}
	if (pid == 0) != (job == "") {
		t.Fatalf("%s and %s go together: the GPU program and the SLURM_JOB_ID in its environment", envGPUPID, envGPUJob)
	}

	_, broker := schematest.Broker(t, kfake.SeedTopics(1, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicAllocations))
	dir, web := t.TempDir(), freeAddr(t)
	const host = "hardware"
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	logs := &lockedWriter{w: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"collector", "--source", "nvml", "--collector.host", host,
			"--collector.interval", "500ms", "--attribution.interval", "1s", "--attribution.state-file", filepath.Join(dir, "attribution.json"),
			"--spool.dir", filepath.Join(dir, "spool"), "--kafka.brokers", broker, "--web.listen-address", web},
			noEnv, &bytes.Buffer{}, logs)
	}()
	defer func() {
		if t.Failed() {
			t.Logf("collector log:\n%s", logs.String())
		}
	}()
	waitProbe(t, http.DefaultClient, "http://"+web, http.StatusOK, "ready")

	if pid != 0 {
		open := waitAlloc(t, broker, func(a schemas.Alloc) bool { return a.JobID == job && a.EndMillis == 0 })
		if open.Host != host || open.GPUUUID == "" || open.User == "" {
			t.Errorf("open interval of job %s = %+v; want host %q, a GPU UUID and a user", job, open, host)
		}
		t.Logf("job %s (pid %d) attributed to GPU %d %s %s, user %s", job, pid, open.GPUIndex, open.GPUUUID, open.MIGUUID, open.User)
		// An interval ends at the last poll that saw the job: let two more
		// polls (1s apart) see it, so that it has a length.
		time.Sleep(2500 * time.Millisecond)
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatalf("end the GPU program (pid %d): %v", pid, err)
		}
		closed := waitAlloc(t, broker, func(a schemas.Alloc) bool {
			return a.JobID == job && a.GPUUUID == open.GPUUUID && a.MIGUUID == open.MIGUUID && a.EndMillis > 0
		})
		if closed.StartMillis != open.StartMillis || closed.EndMillis <= closed.StartMillis || closed.EndMillis > killed.UnixMilli() {
			t.Errorf("closed interval %+v does not close the open one %+v at the last poll before the program ended (%d)", closed, open, killed.UnixMilli())
		}
		t.Logf("interval closed: %d ms long, ended %d ms before the program was", closed.EndMillis-closed.StartMillis, killed.UnixMilli()-closed.EndMillis)
	}

	metrics := scrape(t, "http://"+web+"/metrics")
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "heliostat_collector_nvml_") || strings.HasPrefix(line, "heliostat_attrib_") {
			t.Log(line)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("collector: %v", err)
	}

	msgs := schematest.ReadPartition(t, broker, schemas.TopicGPUSamples, 0)
	if len(msgs) == 0 {
		t.Fatalf("no message on %s", schemas.TopicGPUSamples)
	}
	want := make(map[string]bool, len(gpus))
	for _, g := range gpus {
		want[g.UUID+"/"+g.MIGUUID] = true
	}
	var b schemas.SampleBatch
	samples := 0
	for _, m := range msgs {
		if err := schemas.DecodeSampleBatch(m.Value, &b); err != nil {
			t.Fatalf("DecodeSampleBatch(offset %d) = %v", m.Offset, err)
		}
		for _, g := range b.GPUs {
			if !want[g.UUID+"/"+g.MIGUUID] {
				t.Errorf("offset %d names GPU %s %s, which NVML did not list", m.Offset, g.UUID, g.MIGUUID)
			}
		}
		samples += len(b.Samples)
	}
	if samples == 0 || samples%len(gpus) != 0 {
		t.Errorf("%d samples on %s; want a positive multiple of %d GPUs", samples, schemas.TopicGPUSamples, len(gpus))
	}
	t.Logf("%d samples of %d GPUs in %d messages", samples, len(gpus), len(msgs))
}

// waitAlloc reads the allocations topic until a record matches, and fails the
// test after 30 s.
func waitAlloc(t *testing.T, broker string, match func(schemas.Alloc) bool) schemas.Alloc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var b schemas.AllocBatch
	for {
		var seen []schemas.Alloc
		for _, m := range schematest.ReadPartition(t, broker, schemas.TopicAllocations, 0) {
			if err := schemas.DecodeAllocBatch(m.Value, &b); err != nil {
				t.Fatalf("DecodeAllocBatch(offset %d) = %v", m.Offset, err)
			}
			for _, a := range b.Allocs {
				if match(a) {
					return a
				}
			}
			seen = append(seen, b.Allocs...)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s no matching record on %s; seen %+v", schemas.TopicAllocations, seen)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// scrape returns the body of a GET of url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(body)
}
