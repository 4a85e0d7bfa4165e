package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// `sluice listen`'s latency: events posted to a poll endpoint, forwarded
// by a `sluice listen` process to a loopback receiver.

var listenScenario = Scenario{
	Name:  "listen",
	Title: "`sluice listen`: posted → local server",
	What: "One poll endpoint and one `sluice listen` process (the benchmark's sluice binary, signing with the endpoint's " +
		"secret) forwarding its deliveries to one loopback receiver, which verifies each signature. Events are posted " +
		"one per request to /v1/events at 25 events/s for 20 s (500 events), each payload carrying sent_ns, the time " +
		"its request was sent; latency = receipt at the receiver − sent_ns, over the first delivery of every event. " +
		"Target: p95 ≤ 1 s.",
	Run: listenLatency,
}

func listenLatency(ctx context.Context, env *Env) (Table, error) {
	const rate = 25.0
	duration := time.Duration(env.size(20, 4)) * time.Second
	metrics := []Metric{
		{Name: "p50", Unit: "ms"},
		{Name: "p95", Unit: "ms", Target: 1000, AtMost: true},
		{Name: "p99", Unit: "ms"},
		{Name: "max", Unit: "ms"},
		{Name: "delivered", Unit: "deliveries/s"},
	}
	local := receiver.New(nil)
	defer local.Close()
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		typ := fmt.Sprintf("bench.listen.r%d", run)
		pollURL, secret, err := env.API.createListenEndpoint(ctx, typ)
		if err != nil {
			return s, fmt.Errorf("set up the poll endpoint: %w", err)
		}
		if err := local.SetSecret(secret); err != nil {
			return s, err
		}
		base := local.Count()
		l, err := startListen(ctx, env.SluiceBin, pollURL, local.URL(), secret)
		if err != nil {
			return s, err
		}
		defer func() {
			if note := l.stop(context.WithoutCancel(ctx), pollURL); note != "" {
				s.Note = joinNotes(s.Note, note)
			}
		}()

		cpu := env.measureCPU()
		start := time.Now()
		accepted, skipped, err := offerSingles(ctx, env.API, []string{typ}, rate, duration)
		if err != nil {
			return s, err
		}
		limit := time.Until(start.Add(duration + 30*time.Second))
		if dl, ok := ctx.Deadline(); ok {
			limit = min(limit, time.Until(dl))
		}
		local.Await(limit, func(reqs []receiver.Request) bool { return unique(reqs[base:]) >= accepted })
		cpuUsed := cpu()
		reqs := local.Requests()[base:]
		s = latencySample(arrival(reqs), accepted, start)
		s.CPU = cpuUsed
		if bad := unverified(reqs); bad > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("%d requests whose signature did not verify", bad))
		}
		if skipped > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("the load generator skipped %d sends: too many requests outstanding", skipped))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%.0f events/s for %s per run, one per request; one `sluice listen` process per run", rate, duration))
	return t, err
}

// unique is how many distinct webhook-ids reqs hold.
func unique(reqs []receiver.Request) int {
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		seen[r.ID] = true
	}
	return len(seen)
}

// unverified is how many of reqs carry no signature the receiver verified.
func unverified(reqs []receiver.Request) int {
	n := 0
	for _, r := range reqs {
		if !r.Verified {
			n++
		}
	}
	return n
}

// createListenEndpoint makes a poll endpoint subscribed to typ and returns
// its poll URL, on the benchmark's address, and its secret.
func (c *Client) createListenEndpoint(ctx context.Context, typ string) (pollURL, secret string, err error) {
	var ep struct {
		ID      string `json:"id"`
		PollURL string `json:"poll_url"`
		Secret  string `json:"secret"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "poll"}, http.StatusCreated, &ep); err != nil {
		return "", "", err
	}
	if _, err := c.Subscribe(ctx, ep.ID, typ); err != nil {
		return "", "", err
	}
	u, err := url.Parse(ep.PollURL)
	if err != nil {
		return "", "", fmt.Errorf("parse the poll URL: %w", err)
	}
	return c.base + u.Path, ep.Secret, nil
}

// listenProc is a running `sluice listen`.
type listenProc struct {
	cmd        *exec.Cmd
	cursorFile string
	stderr     *syncBuf
	done       chan struct{}
}

// startListen starts `bin listen` forwarding pollURL to forwardTo, with a
// cursor file of its own, and waits until it says it listens.
func startListen(ctx context.Context, bin, pollURL, forwardTo, secret string) (*listenProc, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-listen-")
	if err != nil {
		return nil, fmt.Errorf("make the cursor file's folder: %w", err)
	}
	l := &listenProc{cursorFile: filepath.Join(dir, "cursor"), stderr: &syncBuf{ready: make(chan struct{})}, done: make(chan struct{})}
	l.cmd = exec.Command(bin, "listen", "--poll-url", pollURL, "--forward-to", forwardTo, "--secret", secret,
		"--cursor-file", l.cursorFile)
	l.cmd.Env = cleanEnv()
	l.cmd.Stderr = l.stderr
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := l.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start sluice listen: %w", err)
	}
	go func() {
		_ = l.cmd.Wait()
		close(l.done)
	}()
	select {
	case <-l.stderr.ready:
		return l, nil
	case <-l.done:
		err = fmt.Errorf("sluice listen ended at its start: %s", l.stderr.String())
	case <-ctx.Done():
		err = fmt.Errorf("sluice listen did not say it listens: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("sluice listen did not say it listens within 30 s: %s", l.stderr.String())
	}
	l.stop(ctx, "")
	return nil, err
}

// stop ends the process and, when pollURL is given, reads the poll URL
// with the cursor it kept, which marks the last page it forwarded
// delivered (it would have on its next read), so that the next run starts
// with nothing queued. It returns a note on what went wrong, if anything.
func (l *listenProc) stop(ctx context.Context, pollURL string) string {
	defer os.RemoveAll(filepath.Dir(l.cursorFile))
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		_ = l.cmd.Process.Kill()
		<-l.done
		return "sluice listen did not stop within 10 s of SIGTERM"
	}
	if pollURL == "" {
		return ""
	}
	var state struct{ Cursor string }
	raw, err := os.ReadFile(l.cursorFile)
	if err == nil {
		err = json.Unmarshal(raw, &state)
	}
	if err == nil {
		_, err = pollOnce(ctx, http.DefaultClient, pollURL+"?limit=1&cursor="+url.QueryEscape(state.Cursor))
	}
	if err != nil {
		return "acknowledging the last page: " + err.Error()
	}
	if strings.Contains(l.stderr.String(), "level=WARN") {
		return "sluice listen warned: " + l.stderr.String()
	}
	return ""
}

// syncBuf is a process's standard error: ready is closed once it holds
// listen's "listening" line.
type syncBuf struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, _ := b.buf.Write(p) // a bytes.Buffer's Write fails never
	if bytes.Contains(b.buf.Bytes(), []byte("listening: forwarding deliveries")) {
		b.once.Do(func() { close(b.ready) })
	}
	return n, nil
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
