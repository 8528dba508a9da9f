package publish

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
)

func TestRegisterFlags(t *testing.T) {
	tests := []struct {
		args []string
		want Config
	}{{
		args: nil,
		want: Config{Brokers: []string{"127.0.0.1:9092"}, WriteTimeout: 10 * time.Second, SpoolDir: "data/spool", SpoolMaxBytes: 1 << 30},
	}, {
		args: []string{"--kafka.brokers=k1:9092, k2:9093", "--kafka.write-timeout=3s", "--spool.dir=/var/spool/h", "--spool.max-bytes=1048576"},
		want: Config{Brokers: []string{"k1:9092", "k2:9093"}, WriteTimeout: 3 * time.Second, SpoolDir: "/var/spool/h", SpoolMaxBytes: 1 << 20},
	}}
	for _, tt := range tests {
		var c Config
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.RegisterFlags(fs, func(string) string { return "" })
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("Parse(%q) = %v", tt.args, err)
		}
		if !slices.Equal(c.Brokers, tt.want.Brokers) || c.WriteTimeout != tt.want.WriteTimeout ||
			c.SpoolDir != tt.want.SpoolDir || c.SpoolMaxBytes != tt.want.SpoolMaxBytes {
			t.Errorf("Parse(%q) = %+v; want %+v", tt.args, c, tt.want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", c, err)
		}
	}
}

// TestBrokersFromEnv: $HELIOSTAT_KAFKA_BROKERS is the default of
// --kafka.brokers for every command with a publisher (the collector, the
// actuator's action log), as the systemd units' heliostat.env expects.
func TestBrokersFromEnv(t *testing.T) {
	tests := []struct {
		env  string
		args []string
		want []string
	}{
		{"", nil, []string{"127.0.0.1:9092"}},
		{"k1:9092, k2:9092", nil, []string{"k1:9092", "k2:9092"}},
		{"k1:9092", []string{"--kafka.brokers=k3:9092"}, []string{"k3:9092"}},
	}
	for _, tt := range tests {
		var c Config
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.RegisterFlags(fs, func(k string) string {
			if k == "HELIOSTAT_KAFKA_BROKERS" {
				return tt.env
			}
			return ""
		})
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Brokers, tt.want) {
			t.Errorf("env %q, args %q: brokers %q; want %q", tt.env, tt.args, c.Brokers, tt.want)
		}
		if def := fs.Lookup("kafka.brokers").DefValue; tt.env != "" && def != strings.Join(tt.want, ",") && tt.args == nil {
			t.Errorf("env %q: -h shows default %q", tt.env, def)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value means defaults", Config{}, false},
		{"ipv6 broker", Config{Brokers: []string{"[::1]:9092"}}, false},
		{"broker without port", Config{Brokers: []string{"kafka"}}, true},
		{"broker without host", Config{Brokers: []string{":9092"}}, true},
		{"negative timeout", Config{WriteTimeout: -time.Second}, true},
		{"negative spool size", Config{SpoolMaxBytes: -1}, true},
		{"SASL without a user", Config{Kafka: kafkaconn.Config{SASLMechanism: "plain", SASLPassword: "p"}}, true},
		{"TLS client certificate without its key", Config{Kafka: kafkaconn.Config{CertFile: "c.pem"}}, true},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%s: Validate(%+v) = %v; want error %v", tt.name, tt.cfg, err, tt.wantErr)
		}
	}
}

func TestBrokersFlagEmpty(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs, func(string) string { return "" })
	if err := fs.Parse([]string{"--kafka.brokers= , "}); err == nil {
		t.Errorf("Parse(--kafka.brokers= , ) = nil; want error")
	}
}
