package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// importResult is the part of `import --json` the tests check.
type importResult struct {
	Jobs       int            `json:"jobs"`
	Rejected   int            `json:"rejected"`
	Reasons    map[string]int `json:"reasons"`
	Format     string         `json:"format"`
	Cluster    string         `json:"cluster"`
	To         string         `json:"to"`
	SentJobs   int            `json:"sent_jobs"`
	SentEvents int            `json:"sent_events"`
	JobsPerS   float64        `json:"jobs_per_s"`
	Errors     []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
	} `json:"errors"`
	Conversion struct {
		Events int `json:"events"`
		NoEnd  int `json:"no_end"`
	} `json:"conversion"`
}

func noEnv(string) string { return "" }

// runImportJSON runs `heliostat import ARGS --json` and decodes stdout, which
// must be exactly one JSON object. It returns stderr too.
func runImportJSON(t *testing.T, args ...string) (importResult, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	argv := append([]string{"import", "--json", "--progress-interval", "0"}, args...)
	if err := run(context.Background(), argv, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("heliostat %s: %v\nstderr: %s", strings.Join(argv, " "), err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	var res importResult
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("heliostat %s: decode stdout %q: %v", strings.Join(argv, " "), stdout.String(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("heliostat %s: stdout holds more than one JSON object: %q", strings.Join(argv, " "), stdout.String())
	}
	return res, stderr.String()
}

// fixture copies testdata/name to name in a temporary directory (SWF
// fixtures are kept as .in files, see ingest/trace) and returns its path.
func fixture(t *testing.T, src, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportDryRunSharedTraces: every job of the public traces imports, none
// is rejected.
func TestImportDryRunSharedTraces(t *testing.T) {
	skipInCHDBPass(t)
	for _, tc := range []struct {
		file, format, cluster string
		jobs                  int
	}{
		{"swf/HPC2N-2002-2.2-cln.swf.gz", "swf", "HPC2N-2002-2.2-cln", 202_871},
		{"swf/CTC-SP2-1996-3.1-cln.swf.gz", "swf", "CTC-SP2-1996-3.1-cln", 77_222},
		{"helios/venus_sept_2vc.csv", "helios", "venus_sept_2vc", 1_867},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := sharedData(t, tc.file)
			res, stderr := runImportJSON(t, "--format", tc.format, path, "--dry-run")
			if res.Jobs != tc.jobs || res.Rejected != 0 || len(res.Reasons) != 0 {
				t.Errorf("import --dry-run %s: %d jobs, %d rejected %v; want %d, 0", tc.file, res.Jobs, res.Rejected, res.Reasons, tc.jobs)
			}
			if res.Format != tc.format || res.Cluster != tc.cluster || res.To != "" || res.SentJobs != 0 {
				t.Errorf("import --dry-run %s: format %q, cluster %q, to %q, sent %d; want %q, %q, nothing sent",
					tc.file, res.Format, res.Cluster, res.To, res.SentJobs, tc.format, tc.cluster)
			}
			// Only the cluster chosen for it, from its file name.
			if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 ||
				!strings.Contains(lines[0], "cluster="+tc.cluster) || !strings.Contains(lines[0], "file name") {
				t.Errorf("import --dry-run %s: stderr %q; want one line saying the cluster %s comes from the file name", tc.file, stderr, tc.cluster)
			}
		})
	}
}

// TestImportBadRows: bad rows are counted and reported by line on stderr and
// in the JSON; the good ones import.
// TestImportNothingRead: a file from which no job is read (the wrong
// --format, an empty file) fails, after the summary, with a hint.
func TestImportNothingRead(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.swf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--format", "swf", filepath.Join("testdata", "import_bad.csv")},
		{empty},
	} {
		var stdout, stderr bytes.Buffer
		argv := append([]string{"import", "--dry-run", "--progress-interval", "0"}, args...)
		err := run(context.Background(), argv, noEnv, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "no job read from") || !strings.Contains(err.Error(), "--format swf right?") {
			t.Errorf("heliostat %s = %v; want an error that no job was read, asking about --format", strings.Join(argv, " "), err)
		}
		if !strings.Contains(stdout.String(), "0 jobs") {
			t.Errorf("heliostat %s printed %q; want the summary first", strings.Join(argv, " "), stdout.String())
		}
	}
}

func TestImportBadRows(t *testing.T) {
	for _, tc := range []struct {
		path    string
		jobs    int
		reasons map[string]int
		lines   []int
	}{
		{fixture(t, "import_bad.swf.in", "bad.swf"), 3,
			map[string]int{"bad_field_count": 1, "bad_number": 1, "negative_value": 1, "negative_submit": 1, "time_out_of_range": 2},
			[]int{4, 5, 6, 7, 10}}, // the first shownRejects
		{filepath.Join("testdata", "import_bad.csv"), 2,
			map[string]int{"bad_time": 1, "missing_job_id": 1, "bad_number": 1, "bad_field_count": 1, "negative_value": 1, "time_out_of_range": 2},
			[]int{3, 4, 5, 6, 7}},
	} {
		res, stderr := runImportJSON(t, tc.path, "--dry-run")
		rejected := 0
		for _, n := range tc.reasons {
			rejected += n
		}
		if res.Jobs != tc.jobs || res.Rejected != rejected || !reflect.DeepEqual(res.Reasons, tc.reasons) {
			t.Errorf("import %s: %d jobs, %d rejected %v; want %d, %d %v", tc.path, res.Jobs, res.Rejected, res.Reasons, tc.jobs, rejected, tc.reasons)
		}
		var lines []int
		for _, e := range res.Errors {
			lines = append(lines, e.Line)
			if want := fmt.Sprintf("%s:%d: rejected: %s: ", tc.path, e.Line, e.Reason); !strings.Contains(stderr, want) {
				t.Errorf("import %s: stderr %q lacks %q", tc.path, stderr, want)
			}
		}
		if !reflect.DeepEqual(lines, tc.lines) {
			t.Errorf("import %s: rejected lines %v; want %v", tc.path, lines, tc.lines)
		}
	}
}

func TestImportFlags(t *testing.T) {
	small := fixture(t, "import_small.swf.in", "small.swf")
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--dry-run"}, "want one trace file, got 0"},
		{[]string{small, small, "--dry-run"}, "want one trace file, got 2"},
		{[]string{small, "--to", "s3"}, `--to "s3"`},
		{[]string{small, "--format", "csv"}, `--format "csv"`},
		{[]string{"--dry-run", filepath.Join(t.TempDir(), "missing.swf")}, "missing.swf"},
		{[]string{"--dry-run", filepath.Join(t.TempDir(), "trace.txt")}, "cannot guess"},
		{[]string{small, "--kafka.batch-messages", "0"}, "--kafka.batch-messages 0"},
		{[]string{small, "--kafka.partitions", "0"}, "--kafka.partitions 0"},
		{[]string{small, "--dry-run", "--kafka.partitions", "-3"}, "--kafka.partitions -3"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"import"}, tc.args...), noEnv, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("import %q: error %v; want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestClusterFromPath(t *testing.T) {
	for in, want := range map[string]string{
		"../shared/data/swf/HPC2N-2002-2.2-cln.swf.gz": "HPC2N-2002-2.2-cln",
		"venus_sept_2vc.csv":                           "venus_sept_2vc",
		"/x/cluster_log.CSV.GZ":                        "cluster_log",
		"trace.swf.in":                                 "trace.swf.in",
		".swf":                                         ".swf",
	} {
		if got := clusterFromPath(in); got != want {
			t.Errorf("clusterFromPath(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestDefaultCluster: without --cluster a file is filed under its name,
// except Helios' cluster_log.csv, which every cluster's file is called: it is
// filed under its directory's name, or refused when that gives none.
func TestDefaultCluster(t *testing.T) {
	for _, tc := range []struct {
		path, want, from string // want "": an error
	}{
		{"../shared/data/swf/HPC2N-2002-2.2-cln.swf.gz", "HPC2N-2002-2.2-cln", "the file name"},
		{"venus_sept_2vc.csv", "venus_sept_2vc", "the file name"},
		{"/data/helios/Venus/cluster_log.csv", "Venus", "the directory name"},
		{"Earth/cluster_log.CSV.GZ", "Earth", "the directory name"},
		{"helios/Saturn/Cluster_Log.csv.gz", "Saturn", "the directory name"},
		{"Venus/cluster_log.swf", "cluster_log", "the file name"}, // not Helios' name
		{"Venus/cluster_log_2.csv", "cluster_log_2", "the file name"},
		{"cluster_log.csv", "", ""},
		{"./cluster_log.csv", "", ""},
		{"/cluster_log.csv.gz", "", ""},
	} {
		got, from, err := defaultCluster(tc.path)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "--cluster")):
			t.Errorf("defaultCluster(%q) = %q, %q, %v; want an error asking for --cluster", tc.path, got, from, err)
		case tc.want != "" && (err != nil || got != tc.want || !strings.Contains(from, tc.from)):
			t.Errorf("defaultCluster(%q) = %q, %q, %v; want %q from %s", tc.path, got, from, err, tc.want, tc.from)
		}
	}
}

// TestImportHeliosClusters: two Helios clusters' files, both called
// cluster_log.csv, are filed under two clusters, and the choice is logged.
func TestImportHeliosClusters(t *testing.T) {
	const csv = "job_id,vc,gpu_num,submit_time,duration\n100,a,1,2020-09-01 00:00:00,10\n"
	dir := t.TempDir()
	for _, name := range []string{"Venus", "Earth"} {
		p := filepath.Join(dir, name, "cluster_log.csv")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(csv), 0o644); err != nil {
			t.Fatal(err)
		}
		res, stderr := runImportJSON(t, p, "--dry-run")
		if res.Cluster != name || res.Jobs != 1 {
			t.Errorf("import %s: cluster %q, %d jobs; want %q, 1", p, res.Cluster, res.Jobs, name)
		}
		if !strings.Contains(stderr, "cluster="+name) || !strings.Contains(stderr, "directory name") {
			t.Errorf("import %s: stderr %q; want the cluster chosen and from what logged", p, stderr)
		}
		// --cluster wins, and nothing needs saying.
		res, stderr = runImportJSON(t, p, "--dry-run", "--cluster", "helios-"+name)
		if res.Cluster != "helios-"+name || stderr != "" {
			t.Errorf("import %s --cluster helios-%s: cluster %q, stderr %q; want helios-%[2]s, nothing", p, name, res.Cluster, stderr)
		}
	}
}

// TestImportBadCluster: a cluster name the job events cannot carry fails
// the import before the file is read, naming --cluster (and the file name
// when it came from there), dry run or not.
func TestImportBadCluster(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "import_small.swf.in"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	badName := filepath.Join(dir, "trace\xff.swf")
	badDir := filepath.Join(dir, "Venus\xff", "cluster_log.csv")
	if err := os.MkdirAll(filepath.Dir(badDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{badName, badDir} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good := fixture(t, "import_small.swf.in", "small.swf")
	for _, tc := range []struct {
		args []string
		want []string // in the error
	}{
		{[]string{good, "--cluster", "a\xffb"}, []string{"--cluster", "not valid UTF-8"}},
		{[]string{good, "--cluster", strings.Repeat("x", schemas.MaxStringLen+1)}, []string{"--cluster", "1025 bytes", "1024"}},
		{[]string{badName}, []string{"--cluster", "not valid UTF-8", "file name"}},
		{[]string{badDir, "--format", "swf"}, []string{"--cluster", "not valid UTF-8", "directory name"}},
	} {
		for _, dry := range []string{"--dry-run", "--to=clickhouse"} {
			var stdout, stderr bytes.Buffer
			argv := append([]string{"import", "--progress-interval", "0", dry, "--clickhouse.addr", "127.0.0.1:1"}, tc.args...)
			err := run(context.Background(), argv, noEnv, &stdout, &stderr)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("heliostat %q = %v; want an error containing %q", argv, err, w)
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("heliostat %q printed %q; want nothing: the file is not read", argv, stdout.String())
			}
		}
	}
	// The longest name the wire takes is taken.
	res, _ := runImportJSON(t, good, "--dry-run", "--cluster", strings.Repeat("x", schemas.MaxStringLen))
	if len(res.Cluster) != schemas.MaxStringLen {
		t.Errorf("import --cluster of %d bytes: cluster of %d bytes", schemas.MaxStringLen, len(res.Cluster))
	}
}

// readJobMessages reads every message of the job-events topic and returns
// them by key.
func readJobMessages(t *testing.T, broker string) map[string][][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(schemas.TopicJobEvents)
	conn.Close()
	if err != nil {
		t.Fatalf("partitions of %s: %v", schemas.TopicJobEvents, err)
	}
	out := map[string][][]byte{}
	for _, p := range parts {
		lc, err := kafka.DialLeader(ctx, "tcp", broker, schemas.TopicJobEvents, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		last, err := lc.ReadLastOffset()
		lc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: schemas.TopicJobEvents, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		for range last {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read %s/%d: %v", schemas.TopicJobEvents, p.ID, err)
			}
			out[string(m.Key)] = append(out[string(m.Key)], m.Value)
		}
		r.Close()
	}
	return out
}

// TestImportKafka imports a small SWF file into a real Kafka-protocol broker
// twice and decodes what arrived: one message per job, keyed by cluster and
// job id, identical on both imports.
func TestImportKafka(t *testing.T) {
	_, broker := schematest.Broker(t)
	path := fixture(t, "import_small.swf.in", "small-site.swf")
	for range 2 {
		res, _ := runImportJSON(t, path, "--to", "kafka", "--kafka.brokers", broker, "--kafka.partitions", "3")
		if res.Jobs != 5 || res.SentJobs != 5 || res.SentEvents != 14 || res.To != "kafka" || res.Cluster != "small-site" {
			t.Fatalf("import --to kafka: %+v; want 5 jobs, 14 events sent to kafka, cluster small-site", res)
		}
	}
	msgs := readJobMessages(t, broker)
	if len(msgs) != 5 {
		t.Fatalf("%d keys on %s; want 5 jobs", len(msgs), schemas.TopicJobEvents)
	}
	events := map[string][]schemas.JobEvent{}
	for key, vs := range msgs {
		if len(vs) != 2 || !bytes.Equal(vs[0], vs[1]) {
			t.Errorf("key %q: %d messages, equal %v; want 2 identical (one per import)", key, len(vs), len(vs) == 2 && bytes.Equal(vs[0], vs[1]))
			continue
		}
		var b schemas.JobEventBatch
		if err := schemas.DecodeJobEventBatch(vs[0], &b); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if b.Cluster != "small-site" || b.Source != schemas.SourceTrace || len(b.Events) == 0 {
			t.Fatalf("key %q: cluster %q source %v, %d events", key, b.Cluster, b.Source, len(b.Events))
		}
		if want := string(schemas.JobKey(b.Cluster, b.Events[0].JobID)); key != want {
			t.Errorf("message of job %s has key %q; want %q", b.Events[0].JobID, key, want)
		}
		events[b.Events[0].JobID] = b.Events
	}
	var types []string
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		var s []string
		for _, e := range events[id] {
			s = append(s, e.Type.String()+":"+e.State.String())
		}
		types = append(types, id+"="+strings.Join(s, ","))
	}
	want := []string{
		"1=SUBMIT:PENDING,START:RUNNING,END:COMPLETED",
		"2=SUBMIT:PENDING,START:RUNNING,END:FAILED",
		"3=SUBMIT:PENDING,END:CANCELLED",
		"4=SUBMIT:PENDING,START:RUNNING,END:UNKNOWN", // status -1: ended, outcome not recorded
		"5=SUBMIT:PENDING,START:RUNNING,END:COMPLETED",
	}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events by job:\n%q\nwant\n%q", types, want)
	}
	// Job 1: submitted at UnixStartTime, waited 5 s, ran an hour on 8 of 8
	// requested processors, 2 h limit, user 5 group 1, queue 1 partition 1.
	submit := int64(1027839845) * 1000
	wantEnd := schemas.JobEvent{
		Type: schemas.JobEnd, EventMillis: submit + 3605_000, JobID: "1", ArrayTaskID: schemas.Unknown,
		User: "5", UID: schemas.Unknown, Group: "1", Partition: "1/1", State: schemas.StateCompleted,
		ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: submit, StartMillis: submit + 5000,
		EndMillis: submit + 3605_000, TimeLimitS: 7200, NodeCount: schemas.Unknown, CPUs: 8, GPUs: schemas.Unknown,
		MemReqBytes: schemas.Unknown,
	}
	if got := events["1"]; len(got) != 3 || !reflect.DeepEqual(got[2], wantEnd) {
		t.Errorf("END of job 1:\n%+v\nwant\n%+v", got, wantEnd)
	}
}

// TestImportKafkaHPC2N imports the whole HPC2N trace into the in-process
// broker: every job arrives as one message. It logs the rate.
func TestImportKafkaHPC2N(t *testing.T) {
	skipInCHDBPass(t)
	if testing.Short() {
		t.Skip("202,871 jobs through Kafka; skipped with -short")
	}
	path := sharedData(t, "swf/HPC2N-2002-2.2-cln.swf.gz")
	_, broker := schematest.Broker(t)
	res, stderr := runImportJSON(t, path, "--to", "kafka", "--kafka.brokers", broker, "--kafka.partitions", "4", "--progress-interval", "50ms")
	if !strings.Contains(stderr, "msg=\"import progress\"") {
		t.Errorf("import HPC2N --progress-interval 50ms: no progress on stderr:\n%s", stderr)
	}
	if res.SentJobs != 202_871 || res.SentEvents != res.Conversion.Events {
		t.Fatalf("import HPC2N: sent %d jobs, %d events; want 202871 and %d", res.SentJobs, res.SentEvents, res.Conversion.Events)
	}
	t.Logf("HPC2N to kafka: %.0f jobs/s", res.JobsPerS)
	ctx := context.Background()
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(schemas.TopicJobEvents)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range parts {
		lc, err := kafka.DialLeader(ctx, "tcp", broker, schemas.TopicJobEvents, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		last, err := lc.ReadLastOffset()
		lc.Close()
		if err != nil {
			t.Fatal(err)
		}
		total += last
	}
	if len(parts) != 4 || total != 202_871 {
		t.Errorf("%s: %d messages in %d partitions; want 202871 in 4", schemas.TopicJobEvents, total, len(parts))
	}
}

// TestImportClickHouse imports a small file straight into ClickHouse twice:
// the jobs are there once each, with the states the trace gives.
func TestImportClickHouse(t *testing.T) {
	ch, conn := schematest.Database(t)
	path := fixture(t, "import_small.swf.in", "small-site.swf")
	for range 2 {
		res, _ := runImportJSON(t, append([]string{path, "--to", "clickhouse", "--clickhouse.batch-events", "4"}, chFlags(ch)...)...)
		if res.SentJobs != 5 || res.SentEvents != 14 || res.To != "clickhouse" {
			t.Fatalf("import --to clickhouse: %+v; want 5 jobs, 14 events sent to clickhouse", res)
		}
	}
	if n := schematest.Count(t, conn, ch.Database+".jobs FINAL"); n != 5 {
		t.Errorf("count() FROM jobs FINAL = %d after two imports; want 5", n)
	}
	if n := schematest.Count(t, conn, ch.Database+".job_events FINAL"); n != 14 {
		t.Errorf("count() FROM job_events FINAL = %d after two imports; want 14", n)
	}
	rows, err := conn.Query(context.Background(), "SELECT job_id, state, last_event, toUnixTimestamp(submit_time), "+
		"ifNull(toUnixTimestamp(end_time), 0), ifNull(cpus, 0) FROM "+ch.Database+".jobs FINAL WHERE cluster = 'small-site' ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, state, last string
		var submit, end, cpus uint32
		if err := rows.Scan(&id, &state, &last, &submit, &end, &cpus); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %d %d %d", id, state, last, submit, end, cpus))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	const s = 1027839845
	want := []string{
		fmt.Sprintf("1 COMPLETED END %d %d 8", s, s+3605),
		fmt.Sprintf("2 FAILED END %d %d 4", s+60, s+160),
		fmt.Sprintf("3 CANCELLED END %d 0 16", s+120),      // never started: end time unknown, requested processors
		fmt.Sprintf("4 UNKNOWN END %d %d 2", s+180, s+690), // status -1: ended (wait 10 s, ran 500 s), outcome not recorded
		fmt.Sprintf("5 COMPLETED END %d %d 1", s+240, s+290),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jobs FINAL:\n%q\nwant\n%q", got, want)
	}
}

// TestImportKafkaDown: an import that cannot reach Kafka fails, naming the
// file and how far it got; it does not stop silently.
func TestImportKafkaDown(t *testing.T) {
	addr := freeAddr(t) // nothing listens there now
	path := fixture(t, "import_small.swf.in", "small-site.swf")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"import", path, "--kafka.brokers", addr, "--kafka.write-timeout", "5s", "--json"}, noEnv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "0 of 5 jobs written") {
		t.Errorf("import to a dead broker: error %v; want one naming %s and 0 of 5 jobs written", err, path)
	}
	if stdout.Len() != 0 {
		t.Errorf("import to a dead broker printed %q on stdout; want nothing", stdout.String())
	}
}

// TestImportClickHouseHPC2N imports the whole HPC2N trace straight into
// ClickHouse: every job is in jobs once and ended; the 878 jobs of status -1
// (no outcome recorded) ended UNKNOWN.
func TestImportClickHouseHPC2N(t *testing.T) {
	if testing.Short() {
		t.Skip("202,871 jobs into ClickHouse; skipped with -short")
	}
	path := sharedData(t, "swf/HPC2N-2002-2.2-cln.swf.gz")
	ch, conn := schematest.Database(t)
	res, _ := runImportJSON(t, append([]string{path, "--to", "clickhouse"}, chFlags(ch)...)...)
	t.Logf("HPC2N to clickhouse: %.0f jobs/s", res.JobsPerS)
	if n := schematest.Count(t, conn, ch.Database+".jobs FINAL"); n != 202_871 {
		t.Errorf("count() FROM jobs FINAL = %d; want 202871", n)
	}
	if n := schematest.Count(t, conn, ch.Database+".job_events FINAL"); n != uint64(res.Conversion.Events) {
		t.Errorf("count() FROM job_events FINAL = %d; want %d", n, res.Conversion.Events)
	}
	if n := schematest.Count(t, conn, ch.Database+".jobs FINAL WHERE state = 'UNKNOWN'"); n != 878 {
		t.Errorf("jobs that ended UNKNOWN = %d; want the 878 of status -1", n)
	}
	if n := schematest.Count(t, conn, ch.Database+".jobs FINAL WHERE last_event != 'END'"); n != 0 {
		t.Errorf("jobs without an end = %d; want 0 (every HPC2N job ended)", n)
	}
}
