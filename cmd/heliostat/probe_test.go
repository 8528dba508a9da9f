package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chserver"
)

// freeAddr returns a loopback address whose port was free a moment ago, for
// a command's --web.listen-address (chserver.FreePort: below the kernel's
// ephemeral range, where up's own ClickHouse cannot take it first).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := chserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// waitProbe polls base+"/-/ready" (base: "http://127.0.0.1:9400") with
// client until it answers code with a body containing want and /metrics
// says the same (heliostat_ready 1 for 200, 0 otherwise), and fails the test
// after 30 s with the last answer.
func waitProbe(t *testing.T, client *http.Client, base string, code int, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	gauge := "\nheliostat_ready 0\n"
	if code == http.StatusOK {
		gauge = "\nheliostat_ready 1\n"
	}
	var last string
	for {
		resp, err := client.Get(base + "/-/ready")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = resp.Status + ": " + string(body)
			if resp.StatusCode == code && strings.Contains(string(body), want) {
				if resp, err = client.Get(base + "/metrics"); err == nil {
					metrics, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if strings.Contains(string(metrics), gauge) {
						return
					}
					last += " (/metrics without " + strings.TrimSpace(gauge) + ")"
				}
			}
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/-/ready: still %q after 30 s; want %d with %q", base, last, code, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
