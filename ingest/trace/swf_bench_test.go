package trace_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// synthSWF is an SWF trace of n jobs shaped like the archive's logs.
func synthSWF(n int) []byte {
	var b bytes.Buffer
	b.WriteString("; Version: 2.2\n; UnixStartTime: 1027839845\n; MaxNodes: 240\n; MaxProcs: 240\n;\n")
	for i := range n {
		fmt.Fprintf(&b, "%6d %8d %6d %6d %4d %8.2f %5d %4d %6d %5d %2d %4d %2d %4d %2d %2d %2d %2d\n",
			i+1, i*37, i%600, 30+i%86400, 1+i%64, float64(i%9000)/3, -1, 1+i%64, 3600*(1+i%24), -1,
			i%6-1, i%300, 1+i%3, i%500-1, -1, 1+i%2, -1, -1)
	}
	return b.Bytes()
}

// BenchmarkReadSWF reads a 10,000-job synthetic trace from memory.
func BenchmarkReadSWF(b *testing.B) {
	data := synthSWF(10_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		tr, err := trace.ReadSWF(bytes.NewReader(data))
		if err != nil || len(tr.Jobs) != 10_000 {
			b.Fatalf("ReadSWF = %d jobs, %d rejected %v, %v; want 10000", len(tr.Jobs), tr.Rejected, tr.Reasons, err)
		}
	}
}

// BenchmarkOpenHPC2N loads the real 202,871-job HPC2N log, gunzip included.
func BenchmarkOpenHPC2N(b *testing.B) {
	path := realTrace(b, "swf/HPC2N-2002-2.2-cln.swf.gz")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := trace.Open(path, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadHelios reads a 10,000-job synthetic cluster_log.csv.
func BenchmarkReadHelios(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n")
	for i := range 10_000 {
		fmt.Fprintf(&buf, "%d,u%d,vc%d,%d,%d,1,COMPLETED,2020-09-01 %02d:%02d:%02d,2020-09-01 %02d:%02d:%02d,2020-09-02 00:00:00,%d,%d\n",
			i, i%300, i%20, i%9, 6*(i%9), i/3600%12, i/60%60, i%60, 12+i/3600%12, i/60%60, i%60, 3600+i, 43200)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		tr, err := trace.ReadHelios(bytes.NewReader(data), nil)
		if err != nil || len(tr.Jobs) != 10_000 {
			b.Fatalf("ReadHelios = %d jobs, %d rejected %v, %v; want 10000", len(tr.Jobs), tr.Rejected, tr.Reasons, err)
		}
	}
}
