// Package chserver runs a local ClickHouse server as a child process on its own
// data directory and ports. The embedded dev stack (`heliostat up`), the bench and
// the integration tests use it; production points at an existing ClickHouse.
package chserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/heliostat-dev/heliostat/internal/aptinstall"
)

// ErrNotInstalled is returned when no clickhouse-server binary can be found or
// installed.
var ErrNotInstalled = errors.New("chserver: clickhouse-server is not installed")

// Config says where and how to run the server.
type Config struct {
	// Dir holds the data, logs and temporary files. Required; created if missing.
	Dir string
	// Binary is the server executable. Default: clickhouse-server from PATH or
	// /usr/bin.
	Binary string
	// ConfigFile is the packaged server config that the command-line overrides
	// adjust. Default: /etc/clickhouse-server/config.xml.
	ConfigFile string
	// TCPPort is the native-protocol port; 0 picks a free one. HTTPPort and
	// InterserverPort are always picked free when 0.
	TCPPort, HTTPPort, InterserverPort int
	// StartTimeout bounds the wait for the server to answer a ping. Default 60s.
	StartTimeout time.Duration
	// Install lets Start install Debian's clickhouse-server package with apt-get
	// when the binary is missing and the process runs as root.
	Install bool
	// NotInstalledHint, when set, ends the error of a missing binary with
	// what else the caller's user can do, in the caller's terms (a command
	// with --clickhouse.addr: "or point --clickhouse.addr at an existing
	// server"). Default: none, for a caller with no other server to use.
	NotInstalledHint string
	// TLS, when set, opens the secure native-protocol port (tcp_port_secure)
	// with these files. Default nil: no secure port, as the packaged config
	// leaves it (its tcp_port_secure is commented out).
	TLS *TLSFiles
	// TCPSecurePort is the secure native-protocol port when TLS is set; 0
	// picks a free one. Ignored without TLS.
	TCPSecurePort int

	// pickPort picks a free port; nil means FreePort. Tests set it to hand
	// out a port that is taken.
	pickPort func() (int, error)
	// lookBinary finds an installed server; nil means lookBinary. Tests
	// set it to find none.
	lookBinary func() (string, error)
}

// portAttempts bounds how often Start picks fresh ports when the server
// finds one of the ports it picked taken.
const portAttempts = 5

// ErrPortTaken marks a start-up that failed because one of the server's
// ports was in use.
var ErrPortTaken = errors.New("a port is already in use")

// portTaken is the error of a start-up that found port in use; port is 0
// when the server's log did not say which.
type portTaken struct{ port int }

func (e portTaken) Error() string {
	if e.port == 0 {
		return ErrPortTaken.Error()
	}
	return fmt.Sprintf("port %d is already in use", e.port)
}

func (e portTaken) Is(target error) bool { return target == ErrPortTaken }

// addrInUse finds the port in the server's "Address already in use:
// host:port" log line.
var addrInUse = regexp.MustCompile(`Address already in use: \S*:(\d+)`)

// errForeign marks a ping answered by a server that is not this one.
var errForeign = errors.New("another ClickHouse server answers on the port")

// TLSFiles are the PEM files of the server's secure native port.
type TLSFiles struct {
	// CertFile and KeyFile are the server's certificate and key. Required.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the server require a client certificate
	// signed by one of the CAs in it (openSSL verificationMode strict); the
	// system CAs are then not trusted for clients.
	ClientCAFile string
}

// Server is a running child clickhouse-server.
type Server struct {
	cfg    Config
	logger *slog.Logger

	// mu guards p and stopped: Supervise restarts the server while
	// another goroutine may call Stop or PID.
	mu sync.Mutex
	// p is the latest process started; nil before the first start.
	p *process
	// stopped is set by Stop: no process starts after it.
	stopped bool
}

// process is one run of the server binary.
type process struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; err is then its exit
	// status (an *exec.ExitError: "signal: killed", "exit status 70").
	done chan struct{}
	err  error
	// errLogFrom is the size of the error log before the process started:
	// what lies past it is this run's.
	errLogFrom int64
}

// errStopped is the error of a start after Stop.
var errStopped = errors.New("chserver: server stopped")

// FindBinary returns the clickhouse-server path, installing Debian's package when
// install is set and the process is root. The error says what to install.
func FindBinary(install bool, logger *slog.Logger) (string, error) {
	return findBinary(install, lookBinary, logger)
}

func findBinary(install bool, look func() (string, error), logger *slog.Logger) (string, error) {
	if p, err := look(); err == nil {
		return p, nil
	}
	if apt := aptinstall.New(); install && apt.Root {
		logger.Info("clickhouse-server is missing; installing it with apt-get")
		err := apt.Install(nil, "clickhouse-server", "clickhouse-client")
		switch {
		case err == nil:
			if p, err := look(); err == nil {
				return p, nil
			}
		case !errors.Is(err, aptinstall.ErrUnavailable):
			return "", fmt.Errorf("chserver: %w", err)
		}
	}
	return "", fmt.Errorf("%w: install it with `sudo apt-get install clickhouse-server clickhouse-client` (Debian/Ubuntu) or from clickhouse.com", ErrNotInstalled)
}

func lookBinary() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// drawn at random from 10,000 up to the start of the kernel's ephemeral
// range (ip_local_port_range; 32,768 when it cannot be read). A port taken
// by listening on port 0 comes from that range, where any outgoing
// connection takes its local port and where another server picking its
// ports this way draws from the same few thousand: the port may be taken
// before the server binds it (CI once failed so, `heliostat up`'s web port
// taken by its own ClickHouse). Below the range only another random draw
// can collide. Where the range leaves too little room below it, or 100
// draws find nothing free, the port comes from listening on port 0.
func FreePort() (int, error) {
	if low := ephemeralLow(); low-portFloor >= 1000 {
		for range 100 {
			p := portFloor + rand.IntN(low-portFloor)
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue
			}
			l.Close()
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chserver: find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFloor is the lowest port FreePort draws: above the well-known and
// most registered service ports.
const portFloor = 10000

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return v
}

// Start launches the server and waits until it answers a ping.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("chserver: Config.Dir is required")
	}
	if cfg.Binary == "" {
		look := cfg.lookBinary
		if look == nil {
			look = lookBinary
		}
		b, err := findBinary(cfg.Install, look, logger)
		if err != nil {
			if cfg.NotInstalledHint != "" {
				err = fmt.Errorf("%w, %s", err, cfg.NotInstalledHint)
			}
			return nil, err
		}
		cfg.Binary = b
	}
	if cfg.ConfigFile == "" {
		cfg.ConfigFile = "/etc/clickhouse-server/config.xml"
	}
	if _, err := os.Stat(cfg.ConfigFile); err != nil {
		return nil, fmt.Errorf("chserver: server config: %w (reinstall clickhouse-server, or set the config file)", err)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("chserver: data dir: %w", err)
	}
	cfg.Dir = dir
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("chserver: create %s: %w", sub, err)
		}
	}
	ports := []*int{&cfg.TCPPort, &cfg.HTTPPort, &cfg.InterserverPort}
	if cfg.TLS != nil {
		if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
			return nil, errors.New("chserver: Config.TLS needs CertFile and KeyFile")
		}
		tlsFiles := *cfg.TLS // the caller's copy keeps its paths
		cfg.TLS = &tlsFiles
		for _, f := range []*string{&tlsFiles.CertFile, &tlsFiles.KeyFile, &tlsFiles.ClientCAFile} {
			if *f == "" {
				continue
			}
			// The server runs in Dir, so relative paths would resolve there.
			abs, err := filepath.Abs(*f)
			if err != nil {
				return nil, fmt.Errorf("chserver: TLS file: %w", err)
			}
			if _, err := os.Stat(abs); err != nil {
				return nil, fmt.Errorf("chserver: TLS file: %w", err)
			}
			*f = abs
		}
		ports = append(ports, &cfg.TCPSecurePort)
	}
	// A port picked free may be taken before the server binds it, by
	// another process (FreePort draws below the kernel's ephemeral range,
	// which makes that rare). The server then exits at once, and Start
	// picks those ports again. Ports the caller chose are the
	// caller's to change.
	var picked []*int
	for _, p := range ports {
		if *p == 0 {
			picked = append(picked, p)
		}
	}
	pick := cfg.pickPort
	if pick == nil {
		pick = FreePort
	}
	for attempt := 1; ; attempt++ {
		for _, p := range picked {
			if *p, err = pick(); err != nil {
				return nil, err
			}
		}
		s := &Server{cfg: cfg, logger: logger}
		err := s.start(ctx)
		if err == nil {
			return s, nil
		}
		var taken portTaken
		if !errors.As(err, &taken) || !pickedPort(picked, taken.port) || attempt == portAttempts {
			return nil, err
		}
		logger.Info("clickhouse server found a port it was given taken; picking new ports", "attempt", attempt, "err", err)
	}
}

// pickedPort reports whether port is one of the picked ones, which Start
// may pick again; port 0 (not known) is if any was picked.
func pickedPort(picked []*int, port int) bool {
	for _, p := range picked {
		if port == 0 || *p == port {
			return true
		}
	}
	return false
}

func (s *Server) start(ctx context.Context) error {
	c := s.cfg
	args := []string{
		"--config-file=" + c.ConfigFile, "--",
		"--path=" + c.Dir + "/data/",
		"--tmp_path=" + c.Dir + "/tmp/",
		"--user_files_path=" + c.Dir + "/user_files/",
		"--format_schema_path=" + c.Dir + "/format_schemas/",
		"--tcp_port=" + strconv.Itoa(c.TCPPort),
		"--http_port=" + strconv.Itoa(c.HTTPPort),
		"--interserver_http_port=" + strconv.Itoa(c.InterserverPort),
		"--listen_host=127.0.0.1",
		"--logger.log=" + c.Dir + "/log/clickhouse-server.log",
		"--logger.errorlog=" + c.Dir + "/log/clickhouse-server.err.log",
		"--logger.level=warning",
	}
	if t := c.TLS; t != nil {
		// An empty dhParamsFile keeps 18.16 from loading the packaged
		// /etc/clickhouse-server/dhparam.pem, which Debian does not ship.
		args = append(args,
			"--tcp_port_secure="+strconv.Itoa(c.TCPSecurePort),
			"--openSSL.server.certificateFile="+t.CertFile,
			"--openSSL.server.privateKeyFile="+t.KeyFile,
			"--openSSL.server.dhParamsFile=",
		)
		if t.ClientCAFile != "" {
			args = append(args,
				"--openSSL.server.verificationMode=strict",
				"--openSSL.server.caConfig="+t.ClientCAFile,
				"--openSSL.server.loadDefaultCAFile=false",
			)
		}
	}
	cmd := exec.Command(c.Binary, args...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	stderr, err := os.Create(filepath.Join(c.Dir, "log", "stderr.log"))
	if err != nil {
		return fmt.Errorf("chserver: stderr log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	// Only what this run appends to the error log tells why it exited.
	p := &process{cmd: cmd, done: make(chan struct{})}
	if fi, err := os.Stat(s.ErrorLog()); err == nil {
		p.errLogFrom = fi.Size()
	}
	// The process is published before it runs, so that a Stop from
	// another goroutine either prevents it or stops it.
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		stderr.Close()
		return errStopped
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		stderr.Close()
		return fmt.Errorf("chserver: start %s: %w", c.Binary, err)
	}
	s.p = p
	s.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		stderr.Close()
		close(p.done)
	}()
	deadline := time.Now().Add(c.StartTimeout)
	for {
		err := s.ping(ctx)
		if err == nil {
			s.logger.Debug("clickhouse server ready", "addr", s.Addr(), "dir", c.Dir)
			return nil
		}
		if errors.Is(err, errForeign) {
			// Ours cannot bind the port and is about to exit, if it has not.
			p.kill()
			return fmt.Errorf("chserver: %w (%w)", err, portTaken{c.TCPPort})
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("chserver: server at %s not ready after %s: %w (see %s/log)", s.Addr(), c.StartTimeout, err, c.Dir)
		}
		select {
		case <-p.done:
			out := s.errLogSince(p.errLogFrom)
			err := fmt.Errorf("chserver: server exited during start-up: %v: %s", p.err, aptinstall.Tail(out, 800))
			if bytes.Contains(out, []byte("Address already in use")) {
				taken := portTaken{}
				if m := addrInUse.FindAllSubmatch(out, -1); m != nil {
					taken.port, _ = strconv.Atoi(string(m[len(m)-1][1]))
				}
				err = fmt.Errorf("%w (%w)", err, taken)
			}
			return err
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errLogSince returns what the error log holds past offset from.
func (s *Server) errLogSince(from int64) []byte {
	out, _ := os.ReadFile(s.ErrorLog())
	if int64(len(out)) >= from {
		out = out[from:]
	}
	return out
}

// ErrorLog returns the path of the server's error log: what it logs at
// warning level and above, and why it exited when it could say.
func (s *Server) ErrorLog() string {
	return filepath.Join(s.cfg.Dir, "log", "clickhouse-server.err.log")
}

// ping checks that the server at Addr answers and that it is this one: a
// ClickHouse that another process runs on the port answers pings too, and
// it keeps its data elsewhere, or, run on the same directory, holds its
// status file, which names its process (ours then cannot lock the file and
// exits). A server whose system.databases cannot be read is taken at its
// word.
func (s *Server) ping(ctx context.Context) error {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{s.Addr()},
		DialTimeout: time.Second,
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return err
	}
	var path string
	err = conn.QueryRow(pctx, "SELECT data_path FROM system.databases WHERE name = 'system'").Scan(&path)
	if err != nil {
		return nil
	}
	if !strings.HasPrefix(path, s.cfg.Dir+"/data/") {
		return fmt.Errorf("%w: %s, whose data is in %s", errForeign, s.Addr(), path)
	}
	if pid := s.statusPID(); pid != 0 && pid != s.process().cmd.Process.Pid {
		return fmt.Errorf("%w: %s, process %d, which runs on the same directory %s", errForeign, s.Addr(), pid, s.cfg.Dir)
	}
	return nil
}

// statusPID returns the process id that the server's status file names:
// the server's that holds the data directory. 0 when it cannot be read.
func (s *Server) statusPID() int {
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, "data", "status"))
	if err != nil {
		return 0
	}
	m := statusPIDLine.FindSubmatch(b)
	if m == nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(m[1]))
	return pid
}

// statusPIDLine finds the process id in the status file ClickHouse keeps
// locked in its data directory ("PID: 1234").
var statusPIDLine = regexp.MustCompile(`(?m)^PID: (\d+)$`)

// Addr returns the native-protocol address, host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.cfg.TCPPort) }

// SecureAddr returns the TLS native-protocol address, host:port, or "" when
// the server was started without TLS.
func (s *Server) SecureAddr() string {
	if s.cfg.TLS == nil {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(s.cfg.TCPSecurePort)
}

// PID returns the process id of the server's latest process.
func (s *Server) PID() int { return s.process().cmd.Process.Pid }

// process returns the latest process started.
func (s *Server) process() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Stop asks the server to shut down (SIGTERM) and waits up to 30s before
// killing it. No process starts after Stop, but Restart's.
func (s *Server) Stop() error {
	s.mu.Lock()
	s.stopped = true
	p := s.p
	s.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		p.kill()
		return errors.New("chserver: server did not stop within 30s; killed")
	}
}

// kill kills the process's group and waits for the process to exit.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Restart starts the server again on the same directory and ports after Stop.
// A port taken in the meantime is waited for, a little: the clients know
// the server by its ports, so they are not changed.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = false
	s.mu.Unlock()
	return s.restart(ctx)
}

// restart starts the server again once its process has exited, unless
// Stop was called.
func (s *Server) restart(ctx context.Context) error {
	select {
	case <-s.process().done:
	default:
		return errors.New("chserver: restart of a running server")
	}
	for attempt := 1; ; attempt++ {
		err := s.start(ctx)
		if err == nil || !errors.Is(err, ErrPortTaken) || attempt == portAttempts {
			return err
		}
		s.logger.Info("clickhouse server found one of its ports taken; trying again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
