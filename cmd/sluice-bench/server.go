package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// benchDB is the database the benchmark creates (dropping any earlier one)
// on the server DATABASE_URL points at.
const benchDB = "sluice_bench"

// server is a running `sluice serve` subprocess and what it was set up with.
type server struct {
	dir      string // temp dir: binary and log
	logPath  string
	logFile  *os.File
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	baseURL  string
	debugURL string // sluice's pprof (SLUICE_DEBUG_ADDR)
	dbURL    string
	apiKey   string
	db       *pgx.Conn // to sluice_bench: settings, quiescence checks
	waitDB   *pgx.Conn // to sluice_bench: sampling pg_stat_activity during runs

	keepBinary bool     // leave the binary for perf's symbols (-keep)
	bin        string   // the sluice binary
	env        []string // sluice's environment
	// settings are the SLUICE_* settings of the scenario running (its
	// Settings), after env.
	settings []string
	// workers are the `serve --worker` processes beside cmd (-workers, or
	// a scenario's Workers); with none, cmd serves every role.
	workers  []*exec.Cmd
	stopOnce sync.Once
	shutdown string // how the stop went
}

// startServer builds sluice (or takes the binary prebuilt, when not ""),
// prepares the database and starts `sluice serve`: one process serving
// every role, or with workers > 0 one `serve --api --dashboard` and that
// many `serve --worker` processes. On error everything it started is
// stopped again.
func startServer(ctx context.Context, keepBinary bool, workers int, prebuilt string) (s *server, err error) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		return nil, errors.New("DATABASE_URL is not set (run through `make bench`)")
	}
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return nil, fmt.Errorf("make the temp dir: %w", err)
	}
	s = &server{dir: dir, logPath: filepath.Join(dir, "sluice.log"), keepBinary: keepBinary}
	defer func() {
		if err != nil {
			s.stop()
			if s.logFile != nil {
				err = fmt.Errorf("%w\n--- tail of %s ---\n%s", err, s.logPath, s.logTail(40))
			}
		}
	}()

	bin := prebuilt
	if bin == "" {
		bin = filepath.Join(dir, "sluice")
		if err := buildSluice(ctx, ".", bin); err != nil {
			return s, err
		}
	}
	dbURL, err := createDatabase(ctx, base)
	if err != nil {
		return s, err
	}
	if s.db, err = pgx.Connect(ctx, dbURL); err != nil {
		return s, fmt.Errorf("connect to the bench database: %w", err)
	}
	if s.waitDB, err = pgx.Connect(ctx, dbURL); err != nil {
		return s, fmt.Errorf("connect to the bench database (waits): %w", err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	port, err := freePort()
	if err != nil {
		return s, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	debugPort, err := freePort()
	if err != nil {
		return s, err
	}
	debugAddr := fmt.Sprintf("127.0.0.1:%d", debugPort)
	s.debugURL, s.dbURL = "http://"+debugAddr, dbURL
	env := append(cleanEnv(),
		"DATABASE_URL="+dbURL,
		"SLUICE_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(key),
		"SLUICE_ALLOW_PRIVATE_TARGETS=true",
		"SLUICE_API_RATE=1000000/s", // the load is one tenant's; the API's limit is not under test
		"SLUICE_ADDR="+addr,
		"SLUICE_DEBUG_ADDR="+debugAddr,
	)
	if out, err := runCmd(ctx, env, bin, "migrate"); err != nil {
		return s, fmt.Errorf("sluice migrate: %w\n%s", err, out)
	}
	if err := pastPartitions(ctx, dbURL); err != nil {
		return s, err
	}
	out, err := runCmd(ctx, env, bin, "tenant", "create", "--name", "bench", "--alert-email", "bench@example.com")
	if err != nil {
		return s, fmt.Errorf("sluice tenant create: %w\n%s", err, out)
	}
	var tenant struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(out, &tenant); err != nil || tenant.APIKey == "" {
		return s, fmt.Errorf("sluice tenant create printed %q", out)
	}
	s.apiKey = tenant.APIKey

	if s.logFile, err = os.Create(s.logPath); err != nil {
		return s, fmt.Errorf("create sluice's log: %w", err)
	}
	s.bin, s.env, s.baseURL = bin, env, "http://"+addr
	return s, s.launch(ctx, workers)
}

// buildSluice builds ./cmd/sluice of the module in dir into bin.
func buildSluice(ctx context.Context, dir, bin string) error {
	logf("building ./cmd/sluice in %s", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/sluice in %s: %w\n%s", dir, err, out)
	}
	return nil
}

// command is a sluice subprocess logging to the server's log.
func (s *server) command(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = s.logFile, s.logFile
	// If the benchmark dies without stopping it, the kernel does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// withoutDebugAddr drops SLUICE_DEBUG_ADDR: only the first process serves
// pprof on it.
func withoutDebugAddr(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SLUICE_DEBUG_ADDR=") {
			out = append(out, kv)
		}
	}
	return out
}

// pids are the sluice processes, for CPU accounting.
func (s *server) pids() []int {
	out := []int{s.cmd.Process.Pid}
	for _, w := range s.workers {
		out = append(out, w.Process.Pid)
	}
	return out
}

// createDatabase drops and creates benchDB on the server of base and
// returns its URL.
func createDatabase(ctx context.Context, base string) (string, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + benchDB + " WITH (FORCE)",
		"CREATE DATABASE " + benchDB,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	u.Path = "/" + benchDB
	return u.String(), nil
}

// pastWeeks is how many past weeks of partitions a database in steady
// state has: with SLUICE_RETENTION's default of 14 days a week goes once
// it ended 14 days ago, so the two weeks before this one remain.
const pastWeeks = 2

// pastPartitions gives the fresh database the week partitions of the last
// pastWeeks weeks (empty), as a database running for weeks has them, so
// that the queries that read every week's partition (a claim reads each
// week's queue index) cost here what they cost in production.
func pastPartitions(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect for the past partitions: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `SELECT sluice_ensure_week(now() - n * interval '7 days') FROM generate_series(1, $1::int) n`, pastWeeks)
	if err != nil {
		return fmt.Errorf("past partitions: %w", err)
	}
	return nil
}

// cleanEnv is this process's environment without DATABASE_URL and SLUICE_*,
// so that only the benchmark's settings reach sluice.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return out
}

func runCmd(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls /readyz until it answers 200.
func (s *server) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.baseURL+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("sluice serve exited before it was ready: %v", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("sluice serve not ready after %s: %w", limit, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exited reports whether the sluice process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop ends sluice (SIGTERM, then SIGKILL after 10 s), closes the database
// connection and removes the binary unless asked to keep it; the log stays. It is safe to call more
// than once and returns how the shutdown went.
func (s *server) stop() string {
	s.stopOnce.Do(func() {
		for _, c := range []*pgx.Conn{s.db, s.waitDB} {
			if c != nil {
				_ = c.Close(context.Background())
			}
		}
		s.shutdown = s.halt()
		if s.logFile != nil {
			_ = s.logFile.Close()
		}
		if !s.keepBinary {
			_ = os.Remove(filepath.Join(s.dir, "sluice"))
		}
	})
	return s.shutdown
}

func (s *server) terminate() string {
	if s.exited() {
		return fmt.Sprintf("had already exited (%v)", s.cmd.ProcessState)
	}
	t0 := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return fmt.Sprintf("stopped %s after SIGTERM (%v)", time.Since(t0).Round(time.Millisecond), s.cmd.ProcessState)
	case <-time.After(10 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return "did not stop within 10s of SIGTERM; killed"
}
