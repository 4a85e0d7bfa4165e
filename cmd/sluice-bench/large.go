package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// The large scenario: events of SLUICE_MAX_PAYLOAD's ceiling (10 MiB) to
// many endpoints each, from one worker process.

const (
	largeSize        = 10 << 20 // a payload's bytes
	largeMaxInFlight = 2        // each endpoint's
)

var largeScenario = Scenario{
	Name:    "large",
	Title:   "Large payloads, 10 MiB to many endpoints",
	Workers: 1,
	// A 10 MiB commit on a loaded machine can outlast the default 5 s.
	Settings: []string{"SLUICE_MAX_PAYLOAD=10MiB", "SLUICE_DB_TIMEOUT=60s"},
	What: "Events of 10 MiB (SLUICE_MAX_PAYLOAD at its ceiling; SLUICE_DB_TIMEOUT 60s), posted one per request with an Idempotency-Key by one client (a 503 retried), each to every one of " +
		"the endpoints (max_in_flight 2), served by one worker process, which is stopped (SIGSTOP) while the events " +
		"are posted and continued (SIGCONT) once all are stored, so that posting and delivering are timed apart; " +
		"loopback receivers discard each body as it streams in, keeping the SHA-256 of its data. Intact = " +
		"deliveries whose data hashes to the payload posted; posted MB/s = payload bytes ÷ (first post sent → last " +
		"answered); delivered MB/s = body bytes received ÷ (worker continued → last delivery); worker peak RSS = " +
		"VmHWM of the worker process (reset when it is continued); stored ÷ one copy = the events' pg_column_size " +
		"plus their deliveries' ÷ (events × 10 MiB). The floor posts the same bodies from the benchmark with Go's " +
		"HTTP client with the concurrency Sluice may use (max_in_flight events at a time, each to every receiver " +
		"at once), to the same receivers, which hash its bodies alike; its MB/s counts only the time spent posting. Targets from issue 41: RSS ≤ endpoints × max_in_flight × 10 MiB × 2 + 100 MiB, stored ≈ one " +
		"copy, delivered MB/s ≥ 0.8× the floor's. This machine's ceiling is the MB/s at which every core would be busy at " +
		"the machine's CPU per MB delivered of the run (Sluice's signing and sending, Postgres's reads, the receivers' " +
		"hashing): cores × delivered MB/s ÷ cores busy from the worker continued to the last delivery; where it is under " +
		"0.8× the floor, the target cannot be met on this machine without making a delivery cheaper.",
	MinTimeout: 10 * time.Minute,
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return runLarge(ctx, env, env.size(100, 12), env.size(10, 4))
	},
}

func largeMetrics(endpoints int) []Metric {
	return []Metric{
		{Name: "intact deliveries", Unit: "%", Target: 100, Worst: true},
		{Name: "posted", Unit: "MB/s"},
		{Name: "delivered", Unit: "MB/s"},
		{Name: "the floor", Unit: "MB/s"},
		{Name: "delivered ÷ the floor's", Unit: "×", Target: 0.8},
		{Name: "this machine's ceiling ÷ the floor's", Unit: "×"},
		{Name: "worker peak RSS", Unit: "MiB", Target: float64(endpoints*largeMaxInFlight*largeSize*2+100<<20) / (1 << 20), AtMost: true, Worst: true},
		{Name: "stored ÷ one copy per event", Unit: "×", Target: 1.05, AtMost: true, Worst: true},
	}
}

func runLarge(ctx context.Context, env *Env, events, endpoints int) (Table, error) {
	receivers := make([]*hashReceiver, endpoints)
	for i := range receivers {
		receivers[i] = newHashReceiver()
		defer receivers[i].Close()
	}
	worker := env.Procs.Sluice[len(env.Procs.Sluice)-1] // the one worker process (Workers: 1)
	t, err := env.Repeat(ctx, largeMetrics(endpoints), func(ctx context.Context, run int) (s Sample, err error) {
		typ := fmt.Sprintf("bench.large.r%d", run)
		var subs []string
		defer func() {
			for _, id := range subs {
				_ = env.API.DeleteSubscription(context.WithoutCancel(ctx), id)
			}
		}()
		for _, r := range receivers {
			r.reset()
			id, err := env.API.CreateEndpoint(ctx, r.srv.URL, largeMaxInFlight)
			if err != nil {
				return s, fmt.Errorf("create endpoint: %w", err)
			}
			sub, err := env.API.Subscribe(ctx, id, typ)
			if err != nil {
				return s, fmt.Errorf("subscribe: %w", err)
			}
			subs = append(subs, sub)
		}
		// The worker waits while the events are posted: their deliveries
		// queue, and are then delivered from the backlog alone.
		if err := syscall.Kill(worker, syscall.SIGSTOP); err != nil {
			return s, fmt.Errorf("stop the worker: %w", err)
		}
		stopped := true
		defer func() {
			if stopped {
				_ = syscall.Kill(worker, syscall.SIGCONT)
			}
		}()

		want := make([][sha256.Size]byte, events)
		start := time.Now()
		var next, retries atomic.Int64
		var wg sync.WaitGroup
		var postErr error
		var postMu sync.Mutex
		for range 1 {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < events && ctx.Err() == nil; i = int(next.Add(1) - 1) {
					p := largePayload(run, i)
					h := sha256.New()
					h.Write(p)
					h.Write([]byte{'}'})
					want[i] = [sha256.Size]byte(h.Sum(nil))
					body := append(append([]byte(`{"type":"`+typ+`","payload":`), p...), '}')
					retried, err := postKeyed(ctx, env.API, body, fmt.Sprintf("large-%d-%d", run, i))
					retries.Add(int64(retried))
					if err != nil {
						postMu.Lock()
						postErr = errors.Join(postErr, fmt.Errorf("event %d: %w", i, err))
						postMu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		posted := time.Since(start)
		if postErr != nil {
			return s, postErr
		}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", worker), []byte("5"), 0); err != nil {
			s.Note = joinNotes(s.Note, "could not reset the worker's peak RSS: "+err.Error())
		}
		cpu := env.measureCPU()
		resumed := time.Now()
		if err := syscall.Kill(worker, syscall.SIGCONT); err != nil {
			return s, fmt.Errorf("continue the worker: %w", err)
		}
		stopped = false
		if n := retries.Load(); n > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("%d posts answered 503 and retried with their Idempotency-Key", n))
		}
		last, complete := awaitHashes(ctx, receivers, events)
		delivering := cpu()
		elapsed := last.Sub(resumed)
		var first time.Time
		for _, r := range receivers {
			r.mu.Lock()
			if !r.first.IsZero() && (first.IsZero() || r.first.Before(first)) {
				first = r.first
			}
			r.mu.Unlock()
		}
		if !first.IsZero() {
			s.Note = joinNotes(s.Note, fmt.Sprintf("first delivery %s after the worker was continued, last %s after",
				first.Sub(resumed).Round(time.Millisecond), elapsed.Round(time.Millisecond)))
		}

		intact, bodyBytes := 0, int64(0)
		wantSet := map[[sha256.Size]byte]bool{}
		for _, h := range want {
			wantSet[h] = true
		}
		for _, r := range receivers { // each payload, once at each receiver
			seen := map[[sha256.Size]byte]bool{}
			r.mu.Lock()
			for _, h := range r.hashes {
				if wantSet[h] {
					seen[h] = true
				}
			}
			r.mu.Unlock()
			intact += len(seen)
			bodyBytes += r.bytes.Load()
		}
		s = Sample{Note: s.Note, Values: map[string]float64{
			"intact deliveries": 100 * float64(intact) / float64(events*endpoints),
			"posted":            float64(events*largeSize) / 1e6 / posted.Seconds(),
			"delivered":         float64(bodyBytes) / 1e6 / elapsed.Seconds(),
		}, TimedOut: !complete}
		if !complete {
			s.Note = joinNotes(s.Note, fmt.Sprintf("%d of %d deliveries received when the run ended", intact, events*endpoints))
		}
		if rss, err := peakRSS(worker); err == nil {
			s.Values["worker peak RSS"] = float64(rss) / (1 << 20)
		} else {
			s.Note = joinNotes(s.Note, "peak RSS: "+err.Error())
		}
		var stored int64
		err = env.DB.QueryRow(ctx, `SELECT coalesce(sum(pg_column_size(e.payload)), 0)
			+ coalesce((SELECT sum(pg_column_size(d.*)) FROM deliveries d WHERE d.event_id = ANY (array_agg(e.id))), 0)
			FROM events e WHERE e.type = $1`, typ).Scan(&stored)
		if err != nil {
			return s, fmt.Errorf("stored bytes: %w", err)
		}
		s.Values["stored ÷ one copy per event"] = float64(stored) / float64(events*largeSize)

		floor, err := largeFloor(ctx, receivers, run, events, typ)
		if err != nil {
			return s, fmt.Errorf("the floor: %w", err)
		}
		s.Values["the floor"] = floor
		s.Values["delivered ÷ the floor's"] = s.Values["delivered"] / floor
		s.Values["this machine's ceiling ÷ the floor's"] = ceiling(s.Values["delivered"], delivering) / floor
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events of %d MiB per run to %d endpoints each (max_in_flight %d): %d MiB stored once, %d MiB delivered",
		events, largeSize>>20, endpoints, largeMaxInFlight, events*largeSize>>20, events*endpoints*largeSize>>20))
	return t, err
}

// postKeyed posts one event with an Idempotency-Key (so that it commits
// in a transaction of its own, and may be posted again), again after each
// 503 up to four times, a second apart; it returns how many it retried.
func postKeyed(ctx context.Context, c *Client, body []byte, key string) (int, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/events", bytes.NewReader(body))
		if err != nil {
			return attempt, fmt.Errorf("make the POST: %w", err)
		}
		req.Header.Set("Authorization", c.auth)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := c.http.Do(req)
		if err != nil {
			return attempt, fmt.Errorf("POST /v1/events: %w", err)
		}
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 2<<10))
		res.Body.Close()
		switch {
		case res.StatusCode == http.StatusAccepted:
			return attempt, nil
		case res.StatusCode != http.StatusServiceUnavailable || attempt == 4:
			return attempt, fmt.Errorf("POST /v1/events: status %d: %s", res.StatusCode, msg)
		}
		select {
		case <-ctx.Done():
			return attempt, fmt.Errorf("wait to post again: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// largePayload is event i's payload of run: largeSize bytes of
// {"blob":"<hex of a seeded stream>"}, made again from (run, i) alone.
func largePayload(run, i int) []byte {
	rng := rand.NewChaCha8([32]byte{byte(run), byte(i), byte(i >> 8)})
	raw := make([]byte, (largeSize-len(`{"blob":""}`))/2)
	_, _ = rng.Read(raw)
	b := make([]byte, 0, largeSize+1)
	b = append(b, `{"blob":"`...)
	b = fmt.Appendf(b, "%x", raw)
	return append(b, `"}`...)
}

// awaitHashes waits until every receiver has events deliveries or ctx
// ends, and returns when the last arrived.
func awaitHashes(ctx context.Context, rs []*hashReceiver, events int) (time.Time, bool) {
	for {
		var last time.Time
		done := true
		for _, r := range rs {
			r.mu.Lock()
			done = done && len(r.hashes) >= events
			last = maxTime(last, r.last)
			r.mu.Unlock()
		}
		if done {
			return last, true
		}
		select {
		case <-ctx.Done():
			return time.Now(), false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// largeFloor posts the bodies Sluice sent, with the concurrency Sluice
// may use: largeMaxInFlight events at a time (an endpoint's max_in_flight),
// each to every receiver at once, and returns MB/s over the time spent
// posting. Its receivers hash each body as they hash Sluice's deliveries.
func largeFloor(ctx context.Context, rs []*hashReceiver, run, events int, typ string) (float64, error) {
	client := newHTTPClient()
	var posting time.Duration
	var sent int64
	for first := 0; first < events; first += largeMaxInFlight {
		var bodies [][]byte
		for i := first; i < min(first+largeMaxInFlight, events); i++ {
			bodies = append(bodies, append(append([]byte(`{"id":"msg_floor","type":"`+typ+`","timestamp":"2026-01-01T00:00:00Z","data":`), largePayload(run, i)...), '}'))
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(rs)*len(bodies))
		for k, r := range rs {
			for j, body := range bodies {
				wg.Go(func() { errs[k*len(bodies)+j] = postLargeFloor(ctx, client, r.srv.URL, first+j, body) })
			}
		}
		wg.Wait()
		posting += time.Since(start)
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		for _, body := range bodies {
			sent += int64(len(body) * len(rs))
		}
	}
	return float64(sent) / 1e6 / posting.Seconds(), nil
}

// postLargeFloor posts one of the floor's bodies to a receiver.
func postLargeFloor(ctx context.Context, client *http.Client, url string, i int, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/floor", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("make the floor's POST: %w", err)
	}
	req.Header.Set("Webhook-Id", "floor-"+strconv.Itoa(i))
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("the floor's POST: %w", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the floor's POST: status %d", res.StatusCode)
	}
	return nil
}

// peakRSS is a process's VmHWM, in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the worker's status: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read VmHWM: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmHWM")
}

// hashReceiver is a loopback receiver that discards each body as it
// streams in, keeping the SHA-256 of its "data" (the payload and the
// envelope's closing brace) by webhook-id, and the bytes it read. The
// floor's posts (path /floor) are hashed alike, and counted by nobody.
type hashReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hashes map[string][sha256.Size]byte
	first  time.Time // when the first delivery was received
	last   time.Time
	bytes  atomic.Int64
}

func newHashReceiver() *hashReceiver {
	r := &hashReceiver{hashes: map[string][sha256.Size]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

func (r *hashReceiver) Close() { r.srv.Close() }

func (r *hashReceiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hashes, r.first, r.last = map[string][sha256.Size]byte{}, time.Time{}, time.Time{}
	r.bytes.Store(0)
}

func (r *hashReceiver) serve(w http.ResponseWriter, req *http.Request) {
	n, sum, err := receiver.HashData(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.URL.Path == "/floor" {
		return
	}
	r.bytes.Add(n)
	r.mu.Lock()
	r.hashes[req.Header.Get("Webhook-Id")] = sum
	r.last = time.Now()
	if r.first.IsZero() {
		r.first = r.last
	}
	r.mu.Unlock()
}
