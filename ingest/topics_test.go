package ingest_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
)

// TestEnsureTopicsNotKafka: a listener that accepts connections and never
// answers (a wrong port: ClickHouse's HTTP, an idle proxy) does not hang
// EnsureTopics past its context, and the error asks whether it is Kafka.
func TestEnsureTopicsNotKafka(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ingest.EnsureTopics(ctx, []string{ln.Addr().String()}, 1, "t") }()
	time.Sleep(300 * time.Millisecond)
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is it a Kafka broker?") {
			t.Errorf("EnsureTopics against a silent listener = %v; want an error asking whether it is Kafka", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EnsureTopics still blocked 10 s after its context ended")
	}
}
