// Package brokertest starts real message brokers for tests, each on a
// free loopback port in a directory of the test's own, stopped when the
// test ends: redis-server (Redis Streams), nats-server with JetStream and
// rabbitmq-server (AMQP 0-9-1). A broker whose server is not installed
// skips the test, saying which Debian package to install.
//
// A broker can be killed (SIGKILL) and started again on the same port
// with the same data directory (Restart), as an operator's restart would.
// The Start* functions do the same without a testing.TB, for programs
// such as the fault suite and the benchmark.
package brokertest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a broker may take to say it is ready.
const startTimeout = 20 * time.Second

// ErrNotInstalled is returned by the Start* functions when the broker's
// server is not installed.
var ErrNotInstalled = errors.New("broker not installed")

// Broker is a running broker: URL is where to reach it.
type Broker struct {
	URL  string
	Port int
	// Dir is the broker's directory: its data, configuration and logs.
	Dir string

	name    string
	ready   string // what its output says once it is ready
	timeout time.Duration
	command func(port int) (*exec.Cmd, error)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	// env is the environment its command-line tools need (RabbitMQ's
	// rabbitmqctl: the node name, its epmd port and cookie).
	env []string
	// epmd is RabbitMQ's Erlang port mapper, which outlives a restart.
	epmd *Broker
}

// Redis starts redis-server on a free loopback port, without persistence,
// and returns it with URL redis://127.0.0.1:PORT. args are extra
// redis-server arguments ("--requirepass", "pw"; "--appendonly", "yes").
func Redis(t testing.TB, args ...string) *Broker {
	t.Helper()
	b, err := StartRedis(t.TempDir(), args...)
	return must(t, b, err)
}

// NATS starts nats-server with JetStream on a free loopback port, its
// store in a directory of the test's own, and returns it with URL
// nats://127.0.0.1:PORT. args are extra nats-server arguments ("-m",
// "8222" for its monitoring port).
func NATS(t testing.TB, args ...string) *Broker {
	t.Helper()
	b, err := StartNATS(t.TempDir(), args...)
	return must(t, b, err)
}

// StartRedis is Redis in dir, for a program; Stop stops it.
func StartRedis(dir string, args ...string) (*Broker, error) {
	bin, err := lookPath("redis-server", "redis-server")
	if err != nil {
		return nil, err
	}
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	return start("redis", func(port int) (*exec.Cmd, error) {
		a := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "notice"}, args...)
		return exec.Command(bin, a...), nil
	}, dir, "Ready to accept connections", "redis://127.0.0.1:%d", startTimeout)
}

// StartNATS is NATS in dir, for a program; Stop stops it.
func StartNATS(dir string, args ...string) (*Broker, error) {
	bin, err := lookPath("nats-server", "nats-server")
	if err != nil {
		return nil, err
	}
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	return start("nats", func(port int) (*exec.Cmd, error) {
		a := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir, "-m", "0"}, args...)
		return exec.Command(bin, a...), nil
	}, dir, "Server is ready", "nats://127.0.0.1:%d", startTimeout)
}

// must is b, stopped when the test ends, or the test skipped (not
// installed) or failed.
func must(t testing.TB, b *Broker, err error) *Broker {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

func lookPath(bin, pkg string) (string, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		path = "/usr/sbin/" + bin
		if _, err2 := exec.LookPath(path); err2 != nil {
			return "", fmt.Errorf("%w: %s (apt-get install -y %s): %w", ErrNotInstalled, bin, pkg, err)
		}
	}
	return path, nil
}

// mkdir makes the broker's directory, as the Start* functions take one
// that may not exist yet.
func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the broker's directory: %w", err)
	}
	return nil
}

// start runs command on a free port until its output says ready, trying
// another port when the first is taken meanwhile.
// The broker runs in a process group of its own, which Kill and Stop
// stop whole (rabbitmq-server is a script whose Erlang VM and helpers are
// its children).
func start(name string, command func(port int) (*exec.Cmd, error), dir, ready, urlFormat string, timeout time.Duration) (*Broker, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		b := &Broker{URL: fmt.Sprintf(urlFormat, port), Port: port, Dir: dir,
			name: name, ready: ready, timeout: timeout, command: command}
		if lastErr = b.run(); lastErr == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s did not start: %w", name, lastErr)
}

// run starts the broker's command on its port and waits until it is
// ready; on failure it is killed again.
func (b *Broker) run() error {
	c, err := b.command(b.Port)
	if err != nil {
		return err
	}
	out := &readyWriter{ready: b.ready, found: make(chan struct{})}
	c.Stdout, c.Stderr = out, out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.WaitDelay = time.Second // a helper that escaped the group does not hold Wait
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", b.name, err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	b.mu.Lock()
	b.cmd, b.done = c, done
	b.mu.Unlock()
	select {
	case <-out.found:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before %q: %s", b.name, b.ready, out.head())
	case <-time.After(b.timeout):
		b.Kill()
		<-done
		return fmt.Errorf("%s not ready after %s: %s", b.name, b.timeout, out.head())
	}
}

// readyWriter is a broker's output: it notes the first line holding
// ready and keeps the first lines for an error message.
type readyWriter struct {
	ready string
	found chan struct{}

	mu    sync.Mutex
	line  []byte
	lines []string
	ok    bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ok {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		l := string(w.line[:i])
		w.line = w.line[i+1:]
		if len(w.lines) < 200 {
			w.lines = append(w.lines, l)
		}
		if strings.Contains(l, w.ready) {
			w.ok = true
			close(w.found)
			w.line = nil
			break
		}
	}
	return len(p), nil
}

func (w *readyWriter) head() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// Kill stops the broker and every process it started at once (SIGKILL
// to its process group). Start runs it again.
func (b *Broker) Kill() {
	b.mu.Lock()
	c := b.cmd
	b.mu.Unlock()
	if c != nil && c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

// Stop kills the broker (and RabbitMQ's epmd) and waits for it to exit.
func (b *Broker) Stop() {
	b.Kill()
	b.waitExit()
	if b.epmd != nil {
		b.epmd.Stop()
	}
}

func (b *Broker) waitExit() {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done != nil {
		<-done
	}
}

// KillAndWait kills the broker and waits until its port refuses
// connections. A killed process's listening socket lingers while the
// kernel tears it down (for an Erlang VM, many milliseconds): a dial
// meanwhile completes its handshake and is then reset.
func (b *Broker) KillAndWait(t testing.TB) {
	t.Helper()
	b.Kill()
	if err := b.WaitDown(startTimeout); err != nil {
		t.Fatal(err)
	}
}

// WaitDown waits until the killed broker has exited and its port
// refuses connections, for at most limit.
func (b *Broker) WaitDown(limit time.Duration) error {
	b.waitExit()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("broker on %s still accepts connections %s after SIGKILL", addr, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the killed broker again on the same port with the same
// data directory (RabbitMQ: the same node name and cookie), killing it
// first if it still runs, and waits until it is ready.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
}

// Start is Restart for a program: the broker killed (if it runs) and
// started again on its port, ready when it returns. The port is retried
// for a few seconds while the kernel still holds it.
func (b *Broker) Start() error {
	b.Kill()
	if err := b.WaitDown(startTimeout); err != nil {
		return err
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = b.run(); err == nil {
			return nil
		}
		inUse := strings.Contains(err.Error(), "in use") || strings.Contains(err.Error(), "eaddrinuse")
		if !inUse || time.Now().After(deadline) {
			return fmt.Errorf("restart on port %d: %w", b.Port, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
