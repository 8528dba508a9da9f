package main

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chserver"
)

// freeAddr returns a loopback address whose port was free a moment ago, for
// a command's --web.listen-address (testPort).
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := testPort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// testPort returns a loopback TCP port that was free a moment ago, for a
// server a test starts, drawn at random below the kernel's ephemeral range
// (ip_local_port_range). A port picked by listening on port 0 comes from
// that range, where any outgoing connection, or a server that picks its own
// ports (up's ClickHouse picks its HTTP and interserver ports so), may take
// it before the test's server binds it: CI once failed with "bind: address
// already in use" for up's web port. Below the range only another test's
// random draw can collide, and the bind check makes that unlikely.
func testPort() (int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const from = 10000
	if low-from >= 1000 {
		for range 100 {
			p := from + rand.IntN(low-from)
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue
			}
			ln.Close()
			return p, nil
		}
	}
	return chserver.FreePort()
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
