// Package brokertest starts real message brokers for tests, each on a
// free loopback port in a directory of the test's own, stopped when the
// test ends: redis-server (Redis Streams), nats-server with JetStream and
// rabbitmq-server (AMQP 0-9-1). A broker whose server is not installed
// skips the test, saying which Debian package to install.
package brokertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a broker may take to say it is ready.
const startTimeout = 20 * time.Second

// Broker is a running broker: URL is where to reach it.
type Broker struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	// env is the environment its command-line tools need (RabbitMQ's
	// rabbitmqctl: the node name, its epmd port and cookie).
	env []string
}

// Redis starts redis-server on a free loopback port, without persistence,
// and returns it with URL redis://127.0.0.1:PORT. args are extra
// redis-server arguments ("--requirepass", "pw").
func Redis(t testing.TB, args ...string) *Broker {
	t.Helper()
	bin := lookPath(t, "redis-server", "redis-server")
	dir := t.TempDir()
	return start(t, "redis", func(port int) *exec.Cmd {
		a := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "notice"}, args...)
		return exec.Command(bin, a...)
	}, "Ready to accept connections", "redis://127.0.0.1:%d", startTimeout)
}

// NATS starts nats-server with JetStream on a free loopback port, its
// store in a directory of the test's own, and returns it with URL
// nats://127.0.0.1:PORT. args are extra nats-server arguments ("-m",
// "8222" for its monitoring port).
func NATS(t testing.TB, args ...string) *Broker {
	t.Helper()
	bin := lookPath(t, "nats-server", "nats-server")
	dir := t.TempDir()
	return start(t, "nats", func(port int) *exec.Cmd {
		a := append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir, "-m", "0"}, args...)
		return exec.Command(bin, a...)
	}, "Server is ready", "nats://127.0.0.1:%d", startTimeout)
}

func lookPath(t testing.TB, bin, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		path = "/usr/sbin/" + bin
		if _, err2 := exec.LookPath(path); err2 != nil {
			t.Skipf("%s is not installed (apt-get install -y %s): %v", bin, pkg, err)
		}
	}
	return path
}

// start runs cmd on a free port until its output says ready, trying
// another port when the first is taken meanwhile.
// The broker runs in a process group of its own, which Kill and the
// test's end stop whole (rabbitmq-server is a script whose Erlang VM and
// helpers are its children).
func start(t testing.TB, name string, cmd func(port int) *exec.Cmd, ready, urlFormat string, timeout time.Duration) *Broker {
	t.Helper()
	var lastErr error
	for range 5 {
		port := freePort(t)
		c := cmd(port)
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.Stderr = c.Stdout
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		b := &Broker{URL: fmt.Sprintf(urlFormat, port), Port: port, cmd: c}
		if lastErr = waitReady(out, ready, timeout); lastErr == nil {
			t.Cleanup(func() { b.Kill(); _ = c.Wait() })
			return b
		}
		b.Kill()
		_ = c.Wait()
	}
	t.Fatalf("%s did not start: %v", name, lastErr)
	return nil
}

// waitReady reads the broker's output until a line holding ready, then
// drains the rest in the background so the broker never blocks on it.
func waitReady(out io.Reader, ready string, timeout time.Duration) error {
	found := make(chan error, 1)
	var seen []string
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok {
				seen = append(seen, sc.Text())
				if strings.Contains(sc.Text(), ready) {
					ok = true
					found <- nil
				}
			}
		}
		if !ok {
			found <- fmt.Errorf("exited before %q: %s", ready, strings.Join(seen, "\n"))
		}
	}()
	select {
	case err := <-found:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("not ready after %s", timeout)
	}
}

// Kill stops the broker and every process it started at once (SIGKILL
// to its process group).
func (b *Broker) Kill() { _ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) }

// KillAndWait kills the broker and waits until its port refuses
// connections. A killed process's listening socket lingers while the
// kernel tears it down (for an Erlang VM, many milliseconds): a dial
// meanwhile completes its handshake and is then reset.
func (b *Broker) KillAndWait(t testing.TB) {
	t.Helper()
	b.Kill()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("broker on %s still accepts connections %s after SIGKILL", addr, startTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
