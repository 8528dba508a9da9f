package kafkaconn_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/internal/testpki"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  kafkaconn.Config
		want string // substring of the error; "" for none
	}{
		{"zero is plaintext", kafkaconn.Config{}, ""},
		{"tls with a CA", kafkaconn.Config{CAFile: "ca.pem"}, ""},
		{"cert without key", kafkaconn.Config{CertFile: "c.pem"}, "--kafka.tls.cert and --kafka.tls.key"},
		{"key without cert", kafkaconn.Config{KeyFile: "k.pem"}, "--kafka.tls.cert and --kafka.tls.key"},
		{"unknown mechanism", kafkaconn.Config{SASLMechanism: "gssapi", SASLUser: "u", SASLPassword: "p"}, `"gssapi": want plain`},
		{"mechanism without user", kafkaconn.Config{SASLMechanism: "plain", SASLPassword: "p"}, "needs --kafka.sasl.user"},
		{"mechanism without password", kafkaconn.Config{SASLMechanism: "SCRAM-SHA-512", SASLUser: "u"}, "needs --kafka.sasl.password-file"},
		{"password file without mechanism", kafkaconn.Config{SASLUser: "u", SASLPasswordFile: "f"}, "--kafka.sasl.mechanism is not"},
		{"password file alone", kafkaconn.Config{SASLPasswordFile: "f"}, "--kafka.sasl.mechanism is not"},
		{"user from the environment alone", kafkaconn.Config{SASLUser: "u", SASLPassword: "p"}, ""},
		{"scram upper case", kafkaconn.Config{SASLMechanism: "SCRAM-SHA-256", SASLUser: "u", SASLPassword: "p"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	env := map[string]string{kafkaconn.EnvSASLUser: "alice", kafkaconn.EnvSASLPassword: "from-env"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c kafkaconn.Config
	c.RegisterFlags(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--kafka.tls.ca", "ca.pem", "--kafka.sasl.mechanism", "scram-sha-512"}); err != nil {
		t.Fatal(err)
	}
	want := kafkaconn.Config{CAFile: "ca.pem", SASLMechanism: "scram-sha-512", SASLUser: "alice", SASLPassword: "from-env"}
	if c != want {
		t.Fatalf("flags gave %+v, want %+v", c, want)
	}
	if !c.TLSOn() {
		t.Fatal("--kafka.tls.ca does not turn TLS on")
	}
}

func TestLoadErrors(t *testing.T) {
	p := testpki.New(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	empty := filepath.Join(dir, "empty")
	for f, b := range map[string]string{garbage: "not a certificate\n", empty: "\n"} {
		if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		cfg  kafkaconn.Config
		want string
	}{
		{"missing CA file", kafkaconn.Config{CAFile: filepath.Join(dir, "nope.pem")}, "--kafka.tls.ca: open"},
		{"CA file without certificates", kafkaconn.Config{CAFile: garbage}, "no PEM certificate"},
		{"key of another certificate", kafkaconn.Config{CertFile: p.ClientCertFile, KeyFile: p.KeyFile}, "--kafka.tls.cert " + p.ClientCertFile},
		{"missing password file", kafkaconn.Config{SASLMechanism: "plain", SASLUser: "u", SASLPasswordFile: filepath.Join(dir, "nope")}, "--kafka.sasl.password-file: open"},
		{"empty password file", kafkaconn.Config{SASLMechanism: "plain", SASLUser: "u", SASLPasswordFile: empty}, "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.cfg.Load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, %v; want an error containing %q", s, err, tc.want)
			}
		})
	}
	s, err := kafkaconn.Config{}.Load()
	if err != nil || s != nil || s.String() != "plaintext" {
		t.Fatalf("zero Config loads as %v, %v; want nil (plaintext)", s, err)
	}
}

// TestBrokerOverTLSAndSASL runs a real Kafka-protocol broker (kfake) that
// requires TLS and SCRAM-SHA-512, and checks that a writer and a reader
// built from a Config exchange a message with it, while wrong credentials
// and an untrusted CA fail with errors that say why.
func TestBrokerOverTLSAndSASL(t *testing.T) {
	p := testpki.New(t)
	const user, pass = "heliostat", "s3cret-pass"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.TLS(p.ServerTLS(false)),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, pass), kfake.Superuser("PLAIN", "plainuser", pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := kafkaconn.Config{CAFile: p.CAFile, SASLMechanism: "scram-sha-512", SASLUser: user, SASLPasswordFile: pwFile}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	roundTrip := func(cfg kafkaconn.Config, value string) error {
		t.Helper()
		sec, err := cfg.Load()
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: "t", Transport: sec.Transport("test"), MaxAttempts: 1,
			RequiredAcks: kafka.RequireAll, WriteTimeout: 5 * time.Second}
		defer w.Close()
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(value)}); err != nil {
			return err
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: "t", Partition: 0, Dialer: sec.Dialer(5 * time.Second), MaxWait: 100 * time.Millisecond})
		defer r.Close()
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				return err
			}
			if string(m.Value) == value {
				return nil
			}
		}
	}
	goodSec, err := good.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkaconn.Probe(ctx, goodSec, []string{"127.0.0.1:1", broker}, 5*time.Second); err != nil {
		t.Fatalf("Probe with a dead broker first, then the live one: %v", err)
	}
	if err := roundTrip(good, "scram"); err != nil {
		t.Fatalf("TLS + SCRAM-SHA-512 round trip: %v", err)
	}
	plainCfg := kafkaconn.Config{CAFile: p.CAFile, SASLMechanism: "plain", SASLUser: "plainuser", SASLPassword: pass}
	if err := roundTrip(plainCfg, "plain"); err != nil {
		t.Fatalf("TLS + PLAIN round trip: %v", err)
	}

	// Failures: each must fail, with an error that names the cause.
	fails := []struct {
		name string
		cfg  kafkaconn.Config
		want []string // any of these substrings
	}{
		{"wrong password", kafkaconn.Config{CAFile: p.CAFile, SASLMechanism: "scram-sha-512", SASLUser: user, SASLPassword: "wrong"}, []string{"SASL", "Authentication"}},
		{"untrusted CA", kafkaconn.Config{TLS: true, SASLMechanism: "scram-sha-512", SASLUser: user, SASLPassword: pass}, []string{"certificate"}},
		{"no SASL", kafkaconn.Config{CAFile: p.CAFile}, []string{"does it want SASL, --kafka.sasl.mechanism?"}},
		{"plaintext", kafkaconn.Config{}, []string{"does it want TLS, --kafka.tls, or SASL"}},
	}
	for _, f := range fails {
		t.Run(f.name, func(t *testing.T) {
			sec, err := f.cfg.Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			err = kafkaconn.Probe(ctx, sec, []string{broker}, 5*time.Second)
			if err == nil {
				t.Fatal("connected; want an error")
			}
			t.Logf("%s: %v", f.name, err)
			for _, w := range f.want {
				if strings.Contains(err.Error(), w) {
					return
				}
			}
			var ke kafka.Error
			t.Fatalf("error %q (kafka error %v) names none of %q", err, errors.As(err, &ke), f.want)
		})
	}
}
