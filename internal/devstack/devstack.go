// Package devstack runs the embedded default of `heliostat up`: a Kafka-protocol
// broker in process (franz-go's kfake, persisted to a data directory) and a local
// ClickHouse server as a child process on its own data directory.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/internal/chserver"
)

// Config says where the stack keeps its data and which ports it uses.
type Config struct {
	// Dir holds kafka/ and clickhouse/. Required.
	Dir string
	// KafkaPort is the broker's port on 127.0.0.1; 0 picks a free one.
	KafkaPort int
	// ClickHousePort is ClickHouse's native port; 0 picks a free one.
	ClickHousePort int
	// Partitions is the partition count of topics the broker creates. Default 4.
	Partitions int
	// Install lets the stack apt-get install clickhouse-server when missing and
	// running as root.
	Install bool
}

// Stack is a running broker and ClickHouse.
type Stack struct {
	Broker     *kfake.Cluster
	ClickHouse *chserver.Server
	logger     *slog.Logger
}

// Start brings the broker and ClickHouse up. Started again on the same Dir it
// resumes with the data of the last run.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Stack, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("devstack: Config.Dir is required")
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	kdir := filepath.Join(cfg.Dir, "kafka")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: %w", err)
	}
	ch, err := chserver.Start(ctx, chserver.Config{Dir: filepath.Join(cfg.Dir, "clickhouse"), TCPPort: cfg.ClickHousePort, Install: cfg.Install}, logger)
	if errors.Is(err, chserver.ErrPortTaken) {
		return nil, fmt.Errorf("devstack: start clickhouse on port %d (another heliostat up, or another ClickHouse, holds a port; choose another ClickHouse port): %w", cfg.ClickHousePort, err)
	}
	if err != nil {
		return nil, err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DataDir(kdir),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
	}
	if cfg.KafkaPort != 0 {
		opts = append(opts, kfake.Ports(cfg.KafkaPort))
	}
	broker, err := kfake.NewCluster(opts...)
	if err != nil {
		_ = ch.Stop()
		return nil, fmt.Errorf("devstack: start kafka broker (port %d in use?): %w", cfg.KafkaPort, err)
	}
	return &Stack{Broker: broker, ClickHouse: ch, logger: logger}, nil
}

// KafkaAddr returns the broker's address.
func (s *Stack) KafkaAddr() string { return s.Broker.ListenAddrs()[0] }

// Stop shuts the broker (persisting its state) and ClickHouse down.
func (s *Stack) Stop() error {
	s.Broker.Close()
	return s.ClickHouse.Stop()
}
