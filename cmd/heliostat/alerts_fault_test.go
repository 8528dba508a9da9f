package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/internal/promtest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// alertsNotFaulted are the alerts TestAlertsOnFaults does not cause, and
// why; dashboards/alerts_test.yaml checks their logic on synthetic series.
var alertsNotFaulted = map[string]string{
	"HeliostatComponentAbsent":         "needs a scrape job left without targets by service discovery (a part stopped here is a target down)",
	"HeliostatIngestLagging":           "needs a million messages behind",
	"HeliostatMessagesExpiredInKafka":  "needs Kafka to delete messages ingest has not read (TestResolveStart in ingest/ledger_internal_test.go counts them)",
	"HeliostatIngestNearRetention":     "needs ingest held behind by half a topic's retention: a backlog larger than its queue and batch, read no further (TestLagWhileClickHouseFails in ingest/lag_test.go checks the age grows while ingest waits)",
	"HeliostatIngestRollupViewFailing": "needs a gpu_samples_1m view that fails (TestRollupViewFailing in ingest/ledger_test.go counts the repairs; TestLandedWithOtherViews in ingest/ledger_internal_test.go the one left to a resend)",
	"HeliostatIngestPartitionRewound":  "needs a topic deleted and created again (TestTopicRecreated in ingest/rewind_test.go checks the gauge)",
	"HeliostatCollectorTicksFailing":   "needs a GPU source that fails (NVML)",
	"HeliostatCollectorSpoolFailing":   "needs a spool disk that fails reads or writes (TestReadErrorIsRetried, TestCommitPersistFails in collector/spool; TestReplayAfterSpoolDamage in collector/publish counts them)",
	"HeliostatCollectorSpoolDamaged":   "needs spool files damaged or deleted while spooled (TestDamageWhileOpen in collector/spool, TestReplayAfterSpoolDamage in collector/publish)",
	"HeliostatGPULost":                 "needs a GPU that stops answering NVML (TestCollectorWithLostGPU in collector/nvml, on go-nvml's mock)",
	"HeliostatGPUStalled":              "needs an NVML call that hangs on one GPU (TestCollectStalledGPU in collector/nvml, on go-nvml's mock)",
	"HeliostatSlurmJobsLost":           "needs jobs that leave squeue between two polls without a completion log",
	"HeliostatAttributionFailing":      "needs NVML's process lists",
	"HeliostatPredictorModelStale":     "needs an hour without a retrained model",
	"HeliostatPredictorInaccurate":     "needs 200 ended jobs predicted badly",
	"HeliostatAnalyticsStale":          "needs an hour without a successful pass",
	"HeliostatJobEventsFromTheFuture":  "needs job events stamped an hour ahead (TestFutureStampedJob in predictor/live checks the gauge)",
	"HeliostatActuatorActionsFailing":  "needs a scheduler that refuses actions",
	"HeliostatActuatorJobsUnreadable":  "needs a Slurm queue holding a job record the actuator cannot read for 15 minutes (TestLoopUnreadableJob in actuator/loop checks the series; TestSlurmUnreadableJob in actuator/slurmadapter the actuator on a real Slurm with such a record)",
}

// alertSelector matches a metric selector in an alert's expression.
var alertSelector = regexp.MustCompile(`\bheliostat_[a-z0-9_]+(\{[^}]*\})?`)

// TestAlertsOnFaults runs the parts as their commands do, scraped by a real
// Prometheus under deploy/prometheus/scrape.yaml's jobs with
// dashboards/alerts.yaml loaded, and breaks things as they break on a
// cluster: a GPU node's collector is gone, another collector's brokers are
// unreachable, the Slurm source cannot read its slurm.conf, the actuator
// has no Slurm, a predictor starts while its ClickHouse is unreachable, a
// message that no decoder takes and two numbered messages with one missing
// between them reach Kafka, and then ClickHouse stops. Each
// alert these faults should raise must become active (pending or firing)
// for the part at fault, with its summary rendered; no alert may be active
// for a part that is not at fault. The alerts no fault here raises are
// listed in alertsNotFaulted.
func TestAlertsOnFaults(t *testing.T) {
	schematest.SkipOnCHDB(t, "a ClickHouse server of its own, which it stops and starts")
	if testing.Short() {
		t.Skip("starts every part, a ClickHouse and a Prometheus")
	}
	// Parallel, like the package's other two longest tests
	// (TestBacktestAccuracyFloors, TestIngestSurvivesSIGKILL): the three
	// run beside each other once the other tests are done. This one mostly
	// waits for alerts to fire and resolve.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ch, err := chserver.Start(ctx, chserver.Config{Dir: t.TempDir(), Install: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start ClickHouse: %v", err)
	}
	chStopped := false
	t.Cleanup(func() {
		if !chStopped {
			_ = ch.Stop()
		}
	})
	_, broker := schematest.Broker(t)
	deadBroker := freeAddr(t)
	db := "--clickhouse.database=alerts"

	type part struct {
		job, addr string
		stop      context.CancelFunc
		done      chan error
		log       *lockedWriter
	}
	var parts []*part
	start := func(job string, args ...string) *part {
		addr := freeAddr(t)
		listen := "--web.listen-address="
		if job == "heliostat-actuator" {
			listen = "--actuator.listen-address="
		}
		pctx, stop := context.WithCancel(ctx)
		p := &part{job: job, addr: addr, stop: stop, done: make(chan error, 1), log: &lockedWriter{w: &strings.Builder{}}}
		args = append(args, listen+addr, "--log.level=warn")
		go func() { p.done <- run(pctx, args, noEnv, io.Discard, p.log) }()
		parts = append(parts, p)
		return p
	}
	chFlag := "--clickhouse.addr=" + ch.Addr()
	ingest := start("heliostat-ingest", "ingest", chFlag, db, "--kafka.brokers="+broker, "--ingest.idle-check=1s", "--summary.interval=1s")
	analytics := start("heliostat-analytics", "analytics", chFlag, db, "--analytics.interval=1s")
	predictor := start("heliostat-predictor", "predictor", "run", chFlag, db, "--predictor.interval=1s")
	actuator := start("heliostat-actuator", "actuator", chFlag, db, "--kafka.brokers="+broker, "--actuator.interval=1s",
		"--actuator.predictor=none", "--spool.dir="+t.TempDir())
	spooling := start("heliostat-collector", "collector", "--source=synthetic", "--synthetic.gpus=1", "--attribution=false",
		"--collector.interval=200ms", "--kafka.brokers="+deadBroker, "--spool.dir="+t.TempDir())
	slurmSrc := start("heliostat-slurm-source", "collector", "--source=slurm", "--slurm.conf="+t.TempDir()+"/missing.conf",
		"--slurm.poll-interval=1s", "--slurm.state-file="+t.TempDir()+"/state.json", "--kafka.brokers="+broker, "--spool.dir="+t.TempDir())
	// A predictor (re)started while its ClickHouse is unreachable.
	waiting := start("heliostat-predictor", "predictor", "run", "--clickhouse.addr="+freeAddr(t), db, "--predictor.interval=1s")
	goneNode := freeAddr(t) // a GPU node whose collector is not running

	jobs := map[string][]string{"heliostat-collector": {goneNode}}
	for _, p := range parts {
		jobs[p.job] = append(jobs[p.job], p.addr)
	}
	shipped, err := promtest.ReadScrapeJobs(deployDir + "/prometheus/scrape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pjobs []promtest.Job
	for _, j := range shipped {
		if len(jobs[j.Name]) == 0 {
			t.Fatalf("scrape job %s: no part started for it", j.Name)
		}
		pjobs = append(pjobs, promtest.Job{Name: j.Name, Targets: jobs[j.Name]})
	}
	prom := promtest.Start(t, promtest.Config{Jobs: pjobs, RuleFiles: []string{"../../dashboards/alerts.yaml"},
		// 2 s: a scrape that times out under load would make HeliostatComponentDown
		// pending for a healthy part.
		Interval: 2 * time.Second})

	// Ingest runs (so that its counters exist before the faults), then the
	// messages: one that no decoder takes, and numbers 1 and 3 of one
	// producer's key.
	waitProbe(t, http.DefaultClient, "http://"+ingest.addr, http.StatusOK, "ready")
	atZero := []string{
		`heliostat_ingest_sequence_gaps_total{topic="` + schemas.TopicGPUSamples + `"} == 0`,
		`heliostat_ingest_messages_total{outcome="deadletter",topic="` + schemas.TopicJobEvents + `"} == 0`,
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		scraped := 0
		for _, q := range atZero {
			if res, err := prom.Query(ctx, q); err == nil && len(res) == 1 {
				scraped++
			}
		}
		if scraped == len(atZero) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has not scraped %v within 30 s", atZero)
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Balancer: &kafka.Hash{}, BatchSize: 1}
	defer w.Close()
	seq := func(n string) []kafka.Header {
		return []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte("alerts-test")}, {Key: schemas.HeaderSequence, Value: []byte(n)}}
	}
	sample := func(t *testing.T) []byte {
		var s schemas.Sample
		s.TSMillis, s.GPU = time.Now().UnixMilli(), 0
		s.Set(schemas.GPUUtil, 50)
		b, err := schemas.AppendSampleBatch(nil, &schemas.SampleBatch{Cluster: "alerts", Host: "n1",
			GPUs: []schemas.GPU{{Index: 0, UUID: "GPU-alerts-0", GIID: -1, CIID: -1}}, Samples: []schemas.Sample{s}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := w.WriteMessages(ctx,
		kafka.Message{Topic: schemas.TopicJobEvents, Key: []byte("garbage"), Value: []byte("not a heliostat message")},
		kafka.Message{Topic: schemas.TopicGPUSamples, Key: []byte("n1"), Value: sample(t), Headers: seq("1")},
		kafka.Message{Topic: schemas.TopicGPUSamples, Key: []byte("n1"), Value: sample(t), Headers: seq("3")},
	); err != nil {
		t.Fatal(err)
	}
	// Ingest stores them (the dead letter and the gap are counted), then
	// ClickHouse goes away.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		gaps, _ := metricValue("http://"+ingest.addr+"/metrics", `heliostat_ingest_sequence_gaps_total{topic="`+schemas.TopicGPUSamples+`"}`)
		dead, _ := metricValue("http://"+ingest.addr+"/metrics", `heliostat_ingest_messages_total{outcome="deadletter",topic="`+schemas.TopicJobEvents+`"}`)
		if gaps == 1 && dead == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest counted %v gaps and %v dead letters in a minute; want 1 and 1\n%s", gaps, dead, ingest.log.String())
		}
	}
	time.Sleep(3 * time.Second) // the analytics and predictor passes succeed once
	chStopped = true
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	// Data keeps coming: ingest cannot insert it.
	if err := w.WriteMessages(ctx, kafka.Message{Topic: schemas.TopicGPUSamples, Key: []byte("n2"), Value: sample(t)}); err != nil {
		t.Fatal(err)
	}

	// alert → the targets (job/instance) or topics it must be active for.
	target := func(p *part) alertKey { return alertKey{job: p.job, instance: p.addr} }
	want := map[string][]alertKey{
		"HeliostatComponentDown":           {{job: "heliostat-collector", instance: goneNode}},
		"HeliostatComponentNotReady":       {target(ingest), target(analytics), target(predictor), target(actuator), target(spooling), target(slurmSrc), target(waiting)},
		"HeliostatWaitingForClickHouse":    {target(waiting)},
		"HeliostatIngestClickHouseDown":    {target(ingest)},
		"HeliostatIngestErrors":            {{instance: ingest.addr}},
		"HeliostatDeadLetters":             {{instance: ingest.addr, topic: schemas.TopicJobEvents}},
		"HeliostatMessagesLostBeforeKafka": {{topic: schemas.TopicGPUSamples}},
		"HeliostatJobSummarizerFailing":    {target(ingest)},
		"HeliostatCollectorSpooling":       {target(spooling)},
		"HeliostatSlurmSourceFailing":      {target(slurmSrc)},
		"HeliostatActuatorLoopFailing":     {target(actuator)},
	}
	var rules []promtest.Rule
	missing := map[string][]alertKey{}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		if rules, err = prom.AlertingRules(ctx); err != nil {
			t.Fatal(err)
		}
		clear(missing)
		for _, r := range rules {
			for _, k := range want[r.Name] {
				found := false
				for _, a := range r.Alerts {
					found = found || k.matches(a.Labels)
				}
				if !found {
					missing[r.Name] = append(missing[r.Name], k)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range parts {
				logs.WriteString(p.job + " " + p.addr + ":\n" + p.log.String() + "\n")
			}
			for _, r := range rules {
				if _, ok := missing[r.Name]; ok {
					res, err := prom.Query(ctx, r.Query)
					logs.WriteString(r.Name + ": " + r.Query + fmt.Sprintf(" = %v %v\n", res, err))
					// Each series now and its lowest value: a counter
					// never seen at zero has no increase.
					for _, sel := range slices.Compact(slices.Sorted(slices.Values(alertSelector.FindAllString(r.Query, -1)))) {
						for _, q := range []string{sel, "min_over_time(" + sel + "[5m])"} {
							res, err := prom.Query(ctx, q)
							logs.WriteString(fmt.Sprintf("  %s = %v %v\n", q, res, err))
						}
					}
				}
			}
			t.Fatalf("alerts not active after 90 s: %v\n%s", missing, logs.String())
		}
	}

	// Every alert is either caused here or listed as not; the active ones
	// are active only where a fault is, with their text rendered.
	names := map[string]bool{}
	for _, r := range rules {
		names[r.Name] = true
		_, caused := want[r.Name]
		reason, listed := alertsNotFaulted[r.Name]
		switch {
		case caused && listed:
			t.Errorf("%s is caused by this test and listed in alertsNotFaulted (%s)", r.Name, reason)
		case !caused && !listed:
			t.Errorf("%s: no fault in this test raises it and alertsNotFaulted does not say why", r.Name)
		}
		for _, a := range r.Alerts {
			l := a.Labels
			ok := slices.ContainsFunc(want[r.Name], func(k alertKey) bool { return k.matches(l) })
			if !ok {
				t.Errorf("%s is %s for %v, where no fault is", r.Name, a.State, l)
			}
			for _, k := range []string{"summary", "description"} {
				if v := a.Annotations[k]; v == "" || strings.Contains(v, "<error expanding") || strings.Contains(v, "{{") {
					t.Errorf("%s %v: annotation %s = %q", r.Name, l, k, v)
				}
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(alertsNotFaulted)) {
		if !names[n] {
			t.Errorf("alertsNotFaulted lists %s, which alerts.yaml does not define", n)
		}
	}
	var active []string
	for _, r := range rules {
		if len(r.Alerts) > 0 {
			active = append(active, r.Name+"×"+strings.Repeat("|", len(r.Alerts)))
		}
	}
	sort.Strings(active)
	t.Logf("active: %v", active)
	for _, p := range parts {
		p.stop()
		if err := <-p.done; err != nil {
			t.Errorf("%s stopped with %v\n%s", p.job, err, p.log.String())
		}
	}
}

// alertKey says whom an alert must be active for: the labels it sets
// (empty: any value).
type alertKey struct{ job, instance, topic string }

func (k alertKey) matches(l map[string]string) bool {
	return (k.job == "" || l["job"] == k.job) && (k.instance == "" || l["instance"] == k.instance) && (k.topic == "" || l["topic"] == k.topic)
}
