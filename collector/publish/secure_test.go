package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/internal/testpki"
)

// TestSecureBroker publishes to a broker that wants TLS and SCRAM-SHA-256:
// with the right credentials messages go straight through; with a wrong
// password they are spooled (nothing lost) and the log says why the broker
// refused, which kafka-go's writer reports only as "EOF".
func TestSecureBroker(t *testing.T) {
	const topic = "secure"
	pki := testpki.New(t)
	c := startCluster(t, topic, kfake.TLS(pki.ServerTLS(false)), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "collector", "right"))
	addr := c.ListenAddrs()[0]
	sec := kafkaconn.Config{CAFile: pki.CAFile, SASLMechanism: kafkaconn.MechanismSCRAMSHA256, SASLUser: "collector", SASLPassword: "right"}

	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), Kafka: sec})
	publishRange(t, p, topic, 0, 10)
	if got := p.count(topic, outcomeSent); got != 10 {
		t.Errorf("sent over TLS + SCRAM = %d; want 10", got)
	}

	sec.SASLPassword = "wrong"
	bad := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), WriteTimeout: 2 * time.Second, Kafka: sec})
	publishRange(t, bad, topic, 0, 3)
	if got := bad.count(topic, outcomeSpooled); got != 3 {
		t.Errorf("spooled with a wrong password = %d; want 3", got)
	}
	waitFor(t, "the reason the brokers refuse", func() bool { return bad.logs.count("brokers refuse connections") == 1 })
	bad.logs.mu.Lock()
	logs := bad.logs.buf.String()
	bad.logs.mu.Unlock()
	if !strings.Contains(logs, "SASL Authentication failed") {
		t.Errorf("the log does not give the broker's reason:\n%s", logs)
	}
	// Readiness keeps the broker's reason while replays fail with kafka-go's
	// bare EOF.
	bad.run(t)
	waitFor(t, "two failed replays", func() bool { return testutil.ToFloat64(bad.m.writeErrors) >= 3 })
	if err := bad.Ready(); err == nil || !strings.Contains(err.Error(), "SASL Authentication failed") {
		t.Errorf("Ready() after failed replays = %v; want the broker's reason", err)
	}
}
