package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
)

func main() {
	rows, _ := strconv.Atoi(os.Args[1])
	br, _ := strconv.Atoi(os.Args[2])
	broker, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	res, err := ingest.Bench(context.Background(), ingest.BenchConfig{Brokers: broker.ListenAddrs(), ClickHouse: chconn.Config{Addr: "127.0.0.1:19000", Database: "hb"}, Rows: rows, BatchRows: br, Progress: os.Stderr}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}
