package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/internal/testpki"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSecureKafka runs the collector, import and ingest commands against a
// Kafka-protocol broker that accepts only TLS connections authenticated
// with SCRAM-SHA-512, as a managed Kafka does, and a ClickHouse server
// reached only on its TLS port with a client certificate; it checks that
// telemetry and jobs reach ClickHouse, and that a wrong password stops
// import with the broker's reason.
func TestSecureKafka(t *testing.T) {
	schematest.SkipOnCHDB(t, "a ClickHouse server with TLS")
	pki := testpki.New(t)
	const user, pass = "heliostat-ingest", "correct horse battery staple"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(pki.ServerTLS(false)),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	dir := t.TempDir()
	srv, err := chserver.Start(context.Background(), chserver.Config{Dir: filepath.Join(dir, "clickhouse"), Install: true,
		TLS: &chserver.TLSFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, ClientCAFile: pki.CAFile}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ch := chconn.Config{Addr: srv.SecureAddr(), Database: "heliostat", TLSCAFile: pki.CAFile, TLSCertFile: pki.ClientCertFile, TLSKeyFile: pki.ClientKeyFile}
	chFlags := []string{"--clickhouse.addr", ch.Addr, "--clickhouse.database", ch.Database,
		"--clickhouse.tls.ca", pki.CAFile, "--clickhouse.tls.cert", pki.ClientCertFile, "--clickhouse.tls.key", pki.ClientKeyFile}
	pwFile := filepath.Join(dir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := []string{"--kafka.brokers", broker, "--kafka.tls.ca", pki.CAFile,
		"--kafka.sasl.mechanism", "scram-sha-512", "--kafka.sasl.user", user}
	envPass := func(k string) string {
		if k == kafkaconn.EnvSASLPassword {
			return pass
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var schemaOut bytes.Buffer
	if err := run(ctx, append([]string{"schema", "apply"}, chFlags...), noEnv, &schemaOut, &schemaOut); err != nil {
		t.Fatalf("schema apply over TLS: %v\n%s", err, schemaOut.String())
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	// ingest creates the topics over the secured connection, then consumes.
	ingestErr := make(chan error, 1)
	ingestLog := &lockedWriter{w: &strings.Builder{}}
	ingestWeb, collectorWeb := freeAddr(t), freeAddr(t)
	go func() {
		ingestErr <- run(runCtx, append(append([]string{"ingest", "--ingest.batch-interval", "100ms", "--kafka.partitions", "2",
			"--web.listen-address", ingestWeb}, chFlags...), secure...),
			envPass, &bytes.Buffer{}, ingestLog)
	}()
	collectorErr := make(chan error, 1)
	collectorLog := &lockedWriter{w: &strings.Builder{}}
	go func() {
		collectorErr <- run(runCtx, append([]string{"collector", "--source", "synthetic", "--synthetic.gpus", "2",
			"--collector.interval", "100ms", "--spool.dir", filepath.Join(dir, "spool"), "--web.listen-address", collectorWeb,
			"--web.tls.cert", pki.CertFile, "--web.tls.key", pki.KeyFile}, secure...),
			envPass, &bytes.Buffer{}, collectorLog)
	}()

	// import reads its password from a file.
	path := fixture(t, "import_small.swf.in", "secure-site.swf")
	res, _ := runImportJSON(t, append([]string{path, "--to", "kafka", "--kafka.sasl.password-file", pwFile}, secure...)...)
	if res.SentJobs != 5 {
		t.Fatalf("import over TLS+SCRAM sent %d jobs; want 5", res.SentJobs)
	}

	conn, err := ch.Open(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		jobs := schematest.Count(t, conn, ch.Database+".jobs FINAL WHERE cluster = 'secure-site'")
		samples := schematest.Count(t, conn, ch.Database+".gpu_samples")
		if jobs == 5 && samples >= 10 {
			t.Logf("over TLS + SCRAM-SHA-512 to Kafka, TLS with a client certificate to ClickHouse: %d jobs, %d GPU samples", jobs, samples)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s: %d of 5 jobs, %d GPU samples in ClickHouse\ningest log:\n%s\ncollector log:\n%s",
				jobs, samples, ingestLog.String(), collectorLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Both say they are ready: the group joined, rows and messages delivered.
	// The collector serves its metrics and probes over HTTPS.
	pkiClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool}}}
	waitProbe(t, http.DefaultClient, "http://"+ingestWeb, http.StatusOK, "ready")
	waitProbe(t, pkiClient, "https://"+collectorWeb, http.StatusOK, "ready")
	if want := "metrics=https://" + collectorWeb + "/metrics"; !strings.Contains(collectorLog.String(), want) {
		t.Errorf("the collector's log does not say %s:\n%s", want, collectorLog.String())
	}
	for _, want := range []string{`kafka_security="tls+sasl/scram-sha-512 as heliostat-ingest"`, "kafka_security=\"tls+sasl/scram-sha-512"} {
		if !strings.Contains(ingestLog.String(), want) && !strings.Contains(collectorLog.String(), want) {
			t.Errorf("neither log says %s", want)
		}
	}
	stop()
	for name, ch := range map[string]chan error{"ingest": ingestErr, "collector": collectorErr} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// A wrong password: ingest keeps trying and logs the broker's reason.
	wrongPass := func(k string) string {
		if k == kafkaconn.EnvSASLPassword {
			return "wrong"
		}
		return ""
	}
	badCtx, badStop := context.WithCancel(ctx)
	badLog := &lockedWriter{w: &strings.Builder{}}
	badErr := make(chan error, 1)
	badWeb := freeAddr(t)
	go func() {
		badErr <- run(badCtx, append(append([]string{"ingest", "--ingest.group", "wrong-password", "--web.listen-address", badWeb},
			chFlags...), secure...), wrongPass, &bytes.Buffer{}, badLog)
	}()
	// Not ready, and /-/ready says why.
	waitProbe(t, http.DefaultClient, "http://"+badWeb, http.StatusServiceUnavailable, "kafka: failing for")
	waitProbe(t, http.DefaultClient, "http://"+badWeb, http.StatusServiceUnavailable, "SASL Authentication failed")
	for i := 0; i < 100 && strings.Count(badLog.String(), "SASL Authentication failed") < 2; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	badStop()
	<-badErr
	if n := strings.Count(badLog.String(), "SASL Authentication failed"); n < 2 {
		t.Errorf("ingest with a wrong password logged the broker's reason %d times in 10 s; want it for the topics and the consumer group:\n%s", n, badLog.String())
	}

	// A wrong password: import fails and says the broker refused it.
	var stderr bytes.Buffer
	argv := append([]string{"import", "--json", "--progress-interval", "0", path, "--to", "kafka", "--kafka.write-timeout", "5s"}, secure...)
	err = run(ctx, argv, func(k string) string {
		if k == kafkaconn.EnvSASLPassword {
			return "wrong"
		}
		return ""
	}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "SASL Authentication failed") {
		t.Fatalf("import with a wrong password: %v; want the broker's SASL authentication error\nstderr: %s", err, stderr.String())
	}
}
