package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fifocheck"
)

// fifoLines and fifoBatchLines are the FIFO scenario's lines: each of the
// first posted one event after another by a sender of its own, the second
// posted together in batches, one batch after another.
var (
	fifoLines      = []string{"", "k1", "k2", "k3", "k4", "k5"}
	fifoBatchLines = []string{"b1", "b2", "b3"}
)

// fifoEndpoints are the scenario's FIFO endpoints, each subscribed to
// every event.
var fifoEndpoints = []string{"fifo1", "fifo2"}

// fifoSettings: no delivery goes dead (so a line's numbers have no gap),
// no circuit opens against receivers that fail one request in six, and a
// timeout costs a second.
var fifoSettings = []string{
	"SLUICE_RETRY_SCHEDULE=" + strings.TrimSuffix(strings.Repeat("50ms,", 60), ","),
	"SLUICE_CIRCUIT_THRESHOLD=100000",
	"SLUICE_DELIVERY_TIMEOUT=1s",
}

// fifoMix is how the FIFO receivers answer.
var fifoMix = fifocheck.Mix{Fail: 0.1, Timeout: 0.02, Reset: 0.05}

// fifoScenario is the FIFO scenario (docs/architecture.md, "FIFO
// endpoints"): two FIFO endpoints whose receivers fail at random, lines
// posted one event after another (one in ten with an Idempotency-Key,
// which Sluice stores with a fan-out job) and in batches, while workers
// are killed with SIGKILL and Postgres is stopped with -m immediate.
func fifoScenario(short bool) Scenario {
	events, rate, kills, crashes := 3000, 120.0, 3, 2
	if short {
		events, rate, kills, crashes = 900, 90, 1, 1
	}
	return Scenario{
		Name: "fifo", Title: fmt.Sprintf("FIFO endpoints with failing receivers: kill -9 a worker %d times and stop postgres -m immediate %d times during a %d-event burst",
			kills, crashes, events),
		Events: events, Rate: rate, FIFO: true, Settings: fifoSettings,
		Bounds: Bounds{AsyncLoss: true},
		Inject: func(ctx context.Context, e *Env, burst time.Duration) error {
			start := time.Now()
			n := kills + crashes
			step := burst * 8 / 10 / time.Duration(n)
			killed, crashed := 0, 0
			for k := range n {
				if err := e.waitFault(ctx, start, burst/10+time.Duration(k)*step); err != nil {
					return err
				}
				var err error
				if k%2 == 1 && crashed < crashes {
					crashed++
					err = e.CrashPG(ctx, time.Second)
				} else {
					err = e.KillWorker(ctx, killed%Workers, time.Second)
					killed++
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// fifoPosts is what the FIFO scenario's senders did.
type fifoPosts struct {
	mu       sync.Mutex
	accepted map[string][]fifocheck.Key // line → keys answered 2xx
	statuses map[string]int             // every post attempt's outcome
	posted   int
	retries  int
}

func (p *fifoPosts) add(status int, lines []string, keys []fifocheck.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := strconv.Itoa(status)
	if status == 0 {
		k = "err"
	}
	p.statuses[k]++
	if status/100 == 2 {
		for i, line := range lines {
			p.accepted[line] = append(p.accepted[line], keys[i])
		}
	}
}

// runFIFO runs the FIFO scenario: its own endpoints, receiver, load and
// checks (fifocheck.Check), with the suite's faults.
func (s *Suite) runFIFO(ctx context.Context, sc Scenario) (res Result, err error) {
	start := time.Now()
	s.logf("scenario %s: %s", sc.Name, sc.Title)
	res = Result{Name: sc.Name, Title: sc.Title, Dir: filepath.Join(s.dir, sc.Name)}
	e := &Env{}
	defer e.close()
	if err := s.newEnv(ctx, envConfig{name: sc.Name, tenants: 1, db: sc.DB, settings: sc.Settings}, e); err != nil {
		return res, fmt.Errorf("%s: setup: %w", sc.Name, err)
	}
	rcv, err := fifocheck.Start(fifoMix)
	if err != nil {
		return res, err
	}
	defer rcv.Close()
	var urls []string
	for _, name := range fifoEndpoints {
		var ep struct{ ID string }
		body := map[string]any{"url": rcv.URL(name), "max_in_flight": MaxInFlight, "ordering": "fifo"}
		if err := e.call(ctx, "/v1/endpoints", body, &ep); err != nil {
			return res, err
		}
		if err := e.call(ctx, "/v1/subscriptions", map[string]any{"endpoint_id": ep.ID, "event_types": []string{"*"}}, nil); err != nil {
			return res, err
		}
		urls = append(urls, rcv.URL(name))
	}

	burst := time.Duration(float64(sc.Events) / sc.Rate * float64(time.Second))
	loadCtx, cancelLoad := context.WithTimeout(ctx, 3*burst+120*time.Second)
	defer cancelLoad()
	posts := &fifoPosts{accepted: map[string][]fifocheck.Key{}, statuses: map[string]int{}}
	client := &http.Client{Timeout: 15 * time.Second}
	var (
		wg        sync.WaitGroup
		injectErr error
		loadDone  time.Time
	)
	loadStart := time.Now()
	perLine := sc.Events / (len(fifoLines) + len(fifoBatchLines))
	lineRate := sc.Rate / float64(len(fifoLines)+len(fifoBatchLines))
	var load sync.WaitGroup
	for _, line := range fifoLines {
		load.Go(func() {
			for n := range perLine {
				pace(loadCtx, loadStart, n, lineRate)
				postUntilAccepted(loadCtx, e, client, posts, []string{line}, n, n%10 == 3)
			}
		})
	}
	const batchSize = 24
	batches := perLine * len(fifoBatchLines) / batchSize
	load.Go(func() {
		for b := range batches {
			pace(loadCtx, loadStart, b*batchSize/len(fifoBatchLines), lineRate)
			lines := make([]string, batchSize)
			for i := range lines {
				lines[i] = fifoBatchLines[i%len(fifoBatchLines)]
			}
			postUntilAccepted(loadCtx, e, client, posts, lines, b*batchSize/len(fifoBatchLines), false)
		}
	})
	wg.Go(func() {
		load.Wait()
		loadDone = time.Now()
	})
	if sc.Inject != nil {
		wg.Go(func() { injectErr = sc.Inject(loadCtx, e, burst) })
	}
	wg.Wait()
	if injectErr != nil {
		res.Notes = append(res.Notes, "fault injection failed: "+injectErr.Error())
	}
	s.logf("  load done in %s; waiting for every accepted event to arrive", loadDone.Sub(loadStart).Round(time.Millisecond))

	expected := map[[2]string][]fifocheck.Key{}
	want := 0
	for _, name := range fifoEndpoints {
		for line, keys := range posts.accepted {
			expected[[2]string{name, line}] = keys
			want += len(keys)
		}
	}
	from := loadDone
	for _, f := range e.Faults() {
		from = maxTime(from, f.End)
	}
	deadline := from.Add(s.cfg.SettleLimit)
	settled := time.Duration(-1)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if fifocheck.Check(rcv.Receipts(), expected).Missing == nil {
			settled = time.Since(from)
			break
		}
		_ = sleep(ctx, 250*time.Millisecond)
	}
	// Whatever Sluice stored without answering the post (a retried post
	// stored twice) is delivered too: wait for the queues to drain.
	res.DB, res.Notes = awaitDrained(ctx, e.DB, urls, 30*time.Second, res.Notes)

	rep := fifocheck.Check(rcv.Receipts(), expected)
	accepted := 0
	for _, keys := range posts.accepted {
		accepted += len(keys)
	}
	res.Figures = Figures{
		Posted: len(fifoLines)*perLine + batches*batchSize, Accepted: accepted, Statuses: posts.statuses,
		Expected: want, Delivered: want - len(rep.Missing), Lost: len(rep.Missing), Duplicates: rep.Duplicates,
		Settle: settled,
	}
	res.Faults = e.Faults()
	res.MaxRSS = e.maxWorkerRSS()
	res.Notes = append(res.Notes, "fifo: "+rep.String())
	for _, list := range [][]string{rep.OutOfOrder, rep.Overlaps, rep.SequenceErrors, rep.Missing} {
		for _, v := range list[:min(len(list), 5)] {
			res.Notes = append(res.Notes, "fifo: "+v)
		}
	}
	for _, p := range append([]*Proc{e.API}, e.Workers...) {
		res.Notes = append(res.Notes, p.UnexpectedExits()...)
		res.exits += len(p.UnexpectedExits())
	}
	var cs []Check
	add := func(name string, pass bool, format string, args ...any) {
		cs = append(cs, Check{Name: name, Value: fmt.Sprintf(format, args...), Pass: pass})
	}
	add("lost = 0", len(rep.Missing) == 0, "%d", len(rep.Missing))
	add("every post accepted", accepted == res.Figures.Posted, "%d of %d", accepted, res.Figures.Posted)
	add("order violations = 0", len(rep.OutOfOrder) == 0, "%d", len(rep.OutOfOrder))
	add("one request of a line at a time", len(rep.Overlaps) == 0, "%d overlapping", len(rep.Overlaps))
	add("webhook-sequence without gaps, the same on resends", len(rep.SequenceErrors) == 0, "%d errors", len(rep.SequenceErrors))
	add("duplicates (resends of a delivered event) counted", true, "%d of %d requests", rep.Duplicates, rep.Receipts)
	add("nothing stuck in the database", res.DB.Stuck == 0 && res.DB.Unfanned == 0 && res.DB.Queued == 0,
		"%d queued, %d due without a dispatch job, %d events without fan-out", res.DB.Queued, res.DB.Stuck, res.DB.Unfanned)
	add("no process exited by itself", res.exits == 0, "%d", res.exits)
	res.Checks = cs
	res.Pass = true
	for _, c := range cs {
		res.Pass = res.Pass && c.Pass
	}
	res.Wall = time.Since(start)
	return res, nil
}

// pace waits until post n of a sender going at rate a second is due.
func pace(ctx context.Context, start time.Time, n int, rate float64) {
	_ = sleep(ctx, time.Until(start.Add(time.Duration(float64(n)/rate*float64(time.Second)))))
}

// postUntilAccepted posts event n of each of lines (one post, or a batch
// of them, in order), again as attempt 1, 2, ... while it is answered 503
// or 429 or not at all, for up to a minute. idem gives a single post an
// Idempotency-Key (for each attempt its own, as a client reposting a new
// request would).
func postUntilAccepted(ctx context.Context, e *Env, client *http.Client, posts *fifoPosts, lines []string, n int, idem bool) {
	first := time.Now()
	for a := 0; ctx.Err() == nil; a++ {
		keys := make([]fifocheck.Key, len(lines))
		evs := make([]map[string]any, len(lines))
		for i, line := range lines {
			keys[i] = fifocheck.Key{N: n, A: a}
			if len(lines) > 1 { // a batch: post n of each line, then n+1, ...
				keys[i].N = n + i/len(fifoBatchLines)
			}
			evs[i] = map[string]any{"type": "faults.fifo", "payload": map[string]any{"line": line, "n": keys[i].N, "a": a}}
			if line != "" {
				evs[i]["ordering_key"] = line
			}
		}
		path, body := "/v1/events", any(evs[0])
		if len(lines) > 1 {
			path, body = "/v1/events/batch", map[string]any{"events": evs}
		}
		header := map[string]string{}
		if idem {
			header["Idempotency-Key"] = fmt.Sprintf("fifo-%s-%d-%d", lines[0], n, a)
		}
		status := postJSON(ctx, client, e, path, body, header)
		posts.add(status, lines, keys)
		posts.mu.Lock()
		if a == 0 {
			posts.posted++
		} else {
			posts.retries++
		}
		posts.mu.Unlock()
		retry := status == 0 || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
		if !retry || time.Since(first) > time.Minute {
			return
		}
		_ = sleep(ctx, 200*time.Millisecond)
	}
}

// postJSON posts body to path as the main tenant and returns the status (0
// when no answer came).
func postJSON(ctx context.Context, client *http.Client, e *Env, path string, body any, header map[string]string) int {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+e.Keys[0])
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode
}
