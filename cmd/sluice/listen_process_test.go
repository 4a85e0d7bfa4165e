package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/watch"
)

// Helpers for tests of `sluice listen` as its users run it: this
// package built into a binary, run as a process of its own.

// built is this package built into a binary, once for the tests that
// run it; TestMain deletes it.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
	out      []byte
}

// sluiceBinary builds this package (once) and returns the binary's path.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "sluice-listen-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "sluice")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		built.out, built.err = exec.CommandContext(ctx, "go", "build", "-o", built.bin, ".").CombinedOutput()
	})
	require.NoError(t, built.err, "go build: %s", built.out)
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// listenProc is a running `sluice listen` process: the lines it printed
// and, once it ended, how.
type listenProc struct {
	cmd    *exec.Cmd
	lines  *watch.List[string] // standard output
	stderr *syncBuffer
	done   chan struct{} // closed once it ended and its output was read
	err    error         // Wait's, once done
}

// startListen runs `bin listen args…`. It is killed when the test ends,
// if it still runs.
func startListen(t *testing.T, bin string, args ...string) *listenProc {
	t.Helper()
	p := &listenProc{lines: &watch.List[string]{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"listen"}, args...)...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines.Add(sc.Text())
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// signal sends sig and waits for the process to end, returning how it
// ended.
func (p *listenProc) signal(t *testing.T, sig os.Signal) error {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice listen did not end within 30 s of %v; it logged:\n%s", sig, p.stderr.String())
		return nil
	}
}

// awaitLines waits until the process printed n lines, failing the test
// if it does not within limit or ends first.
func (p *listenProc) awaitLines(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	if !p.lines.Await(limit, func(l []string) bool { return len(l) >= n }) {
		t.Fatalf("sluice listen printed %d of %d lines within %s; it logged:\n%s", p.lines.Len(), n, limit, p.stderr.String())
	}
}

// postBatch posts one event of type order.created per payload (JSON
// text, kept as it is) in one request and returns their ids.
func (b *listenBundle) postBatch(payloads []string) []string {
	b.t.Helper()
	evs := make([]string, len(payloads))
	for i, p := range payloads {
		evs[i] = `{"type": "order.created", "payload": ` + p + `}`
	}
	status, raw := b.do(http.MethodPost, "/v1/events/batch", `{"events": [`+strings.Join(evs, ",")+`]}`)
	require.Equal(b.t, http.StatusAccepted, status, string(raw))
	var batch struct{ Data []struct{ ID string } }
	require.NoError(b.t, json.Unmarshal(raw, &batch))
	ids := make([]string, len(batch.Data))
	for i, ev := range batch.Data {
		ids[i] = ev.ID
	}
	return ids
}

// polled is what the poll URL answers from its start (which acknowledges
// nothing), once it has n deliveries: their ids in order and each one's
// body as Sluice gives it.
func (b *listenBundle) polled(pollURL string, n int) (order []string, bodies map[string][]byte) {
	b.t.Helper()
	require.LessOrEqual(b.t, n, 500, "one page")
	var page struct{ Data []json.RawMessage }
	require.Eventually(b.t, func() bool {
		res, err := http.Get(fmt.Sprintf("%s?limit=%d", pollURL, n))
		if err != nil {
			return false
		}
		defer res.Body.Close()
		return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&page) == nil && len(page.Data) == n
	}, 60*time.Second, 50*time.Millisecond, "the poll URL has all %d deliveries", n)
	bodies = map[string][]byte{}
	for _, raw := range page.Data {
		var d struct{ ID string }
		require.NoError(b.t, json.Unmarshal(raw, &d))
		order = append(order, d.ID)
		bodies[d.ID] = raw
	}
	return order, bodies
}
