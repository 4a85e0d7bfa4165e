package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/eventschema"
)

// The schema neighbour: one tenant posting the most expensive events its
// schema admits, and some past its budget, beside another tenant's steady
// single posts.

var schemaNeighbourScenario = Scenario{
	Name:  "schema-neighbour",
	Title: "A neighbour's latency beside a tenant posting the most expensive events its schema admits",
	What: "Two tenants of their own. Tenant A, at the default API rate (" + apirate.DefaultRate + "), has the most " +
		"expensive schema the save-time checks accept: 30 anyOf of 30 alternatives, each checking one property " +
		"against \"^(a+)+$\", and a last alternative \"b$\" (900 patterns, 901 evaluations). Its admitted event is " +
		"a string of \"a\"s and a \"b\" four fifths as long as the longest whose price is within the per-request " +
		"budget (eventschema.MaxRequestCost, computed from the prices of two longer strings): the longest takes about " +
		"its whole deadline to validate here, and a slow moment refuses it; its refused event is the " +
		"probe's, 250,000 characters, priced past the budget (422 before validation). First, sequentially, 20 " +
		"refused posts and then 3 admitted ones (waiting out any 429's Retry-After): sluice's CPU per post of each " +
		"kind. Then tenant B posts single events (200-byte payload, a type with no schema and no subscriber) at " +
		"20 a second, each post on its own (a slow answer does not delay the next): alone for a phase, then for a phase beside 4 concurrent senders of tenant A, each posting an " +
		"admitted event three times in four and a refused one the fourth, waiting out Retry-After when answered " +
		"429. B's latency is the round trip of its POST /v1/events (202). Target: B's p50 beside A ≤ 1.5 × B's " +
		"p50 alone. Loopback only; every sender stops at the phase's end, and at 10,000 posts.",
	Run: schemaNeighbour,
}

const (
	snRate      = 20.0 // B's posts a second
	snSenders   = 4    // A's concurrent senders
	snProbeLen  = 250_000
	snMaxPosts  = 10_000
	snProbeType = "bench.probe"
	snPlainType = "bench.neighbour"
)

// probeSchema is the probe's schema: outer anyOf of inner anyOf of a
// pattern on "s", and a last alternative that passes on a final "b".
func probeSchema() string {
	leaf := `{"properties":{"s":{"pattern":"^(a+)+$"}}}`
	inner := `{"anyOf":[` + strings.TrimSuffix(strings.Repeat(leaf+",", 30), ",") + `]}`
	return `{"anyOf":[` + strings.Repeat(inner+",", 30) + `{"properties":{"s":{"pattern":"b$"}}}]}`
}

func probeEvent(n int) []byte {
	return []byte(`{"type":"` + snProbeType + `","payload":{"s":"` + strings.Repeat("a", n) + `b"}}`)
}

// admittedLength is the longest n whose payload {"s": "a"×n + "b"} is
// priced within eventschema.MaxRequestCost. A price is a fixed part plus
// a whole number of units per 128 bytes of the string, so two prices of
// strings past the budget (priced, not validated) give both.
func admittedLength(schema string) (int, error) {
	sch, err := eventschema.Compile([]byte(schema))
	if err != nil {
		return 0, fmt.Errorf("compile the probe's schema: %w", err)
	}
	price := func(bytes int) (uint64, error) {
		doc := `{"s":"` + strings.Repeat("a", bytes-1) + `b"}`
		_, err := sch.Check([]byte(doc), eventschema.NewBudget(eventschema.MaxRequestCost))
		var over *eventschema.OverBudgetError
		if !errors.As(err, &over) {
			return 0, fmt.Errorf("a string of %d bytes was not priced past the budget: %w", bytes, err)
		}
		return over.Cost, nil
	}
	c1, err := price(128 * 1000)
	if err != nil {
		return 0, err
	}
	c2, err := price(128 * 2000)
	if err != nil {
		return 0, err
	}
	per := (c2 - c1) / 1000 // units per 128 bytes
	fixed := c1 - 1000*per
	if per == 0 || fixed >= eventschema.MaxRequestCost {
		return 0, fmt.Errorf("prices %d and %d are not a line", c1, c2)
	}
	bytes := int((eventschema.MaxRequestCost - fixed) * 128 / per)
	return bytes - 1, nil
}

// snTenant is a tenant of the scenario: a client with its key.
func snTenant(ctx context.Context, env *Env, name, rate string) (*Client, error) {
	out, err := env.Sluice(ctx, "tenant", "create", "--name", name, "--alert-email", "bench@example.com")
	if err != nil {
		return nil, fmt.Errorf("sluice tenant create: %w\n%s", err, out)
	}
	var t struct {
		TenantID string `json:"tenant_id"`
		APIKey   string `json:"api_key"`
	}
	if err := json.Unmarshal(out, &t); err != nil || t.APIKey == "" {
		return nil, fmt.Errorf("sluice tenant create printed %q", out)
	}
	if rate != "" {
		if out, err := env.Sluice(ctx, "tenant", "set-rate", "--tenant", t.TenantID, "--rate", rate); err != nil {
			return nil, fmt.Errorf("sluice tenant set-rate: %w\n%s", err, out)
		}
	}
	return newClient(env.API.base, t.APIKey), nil
}

// snAnswer is what a post of the scenario was answered: its status, the
// round trip, the Retry-After of a 429, and the body of a refusal.
type snAnswer struct {
	status int
	took   time.Duration
	retry  time.Duration
	body   string // of a 4xx or 5xx, its first 300 bytes
}

// snPost posts one event.
func snPost(ctx context.Context, c *Client, body []byte) (snAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return snAnswer{}, fmt.Errorf("make the post: %w", err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return snAnswer{}, fmt.Errorf("post: %w", err)
	}
	a := snAnswer{status: resp.StatusCode}
	if a.status >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		a.body = string(b)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a.took = time.Since(start)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		a.retry = time.Duration(s) * time.Second
	}
	return a, nil
}

// snWait waits d or until ctx ends; it reports whether ctx is still live.
func snWait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// snCounts are tenant A's answers.
type snCounts struct {
	mu                            sync.Mutex
	accepted, priced, timed, many int
	other                         map[int]int
	refusedTook                   []time.Duration
}

func (c *snCounts) add(refused bool, status int, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case status == http.StatusAccepted:
		c.accepted++
	case status == http.StatusTooManyRequests:
		c.many++
	case status == http.StatusUnprocessableEntity && refused:
		c.priced++
		c.refusedTook = append(c.refusedTook, took)
	case status == http.StatusUnprocessableEntity:
		c.timed++ // an admitted event refused: by its deadline
	default:
		if c.other == nil {
			c.other = map[int]int{}
		}
		c.other[status]++
	}
}

// snSteady posts to c at snRate for d, each post on its own goroutine
// (a slow answer does not hold the next post back), and returns the round
// trips of its 202s; any other answer is an error.
func snSteady(ctx context.Context, c *Client, d time.Duration) ([]time.Duration, error) {
	body := eventBody(EventIn{Type: snPlainType, Payload: payload(0, 1)})
	tick := time.NewTicker(time.Duration(float64(time.Second) / snRate))
	defer tick.Stop()
	end := time.Now().Add(d)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		took     []time.Duration
		firstErr error
	)
	for range min(int(d.Seconds()*snRate)+1, snMaxPosts) {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil || time.Now().After(end) {
			break
		}
		wg.Go(func() {
			a, err := snPost(ctx, c, body)
			if err == nil && a.status != http.StatusAccepted {
				err = fmt.Errorf("tenant B's post answered %d: %s", a.status, a.body)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmpErr(firstErr, err)
				return
			}
			took = append(took, a.took)
		})
	}
	wg.Wait()
	return took, cmpErr(firstErr, ctx.Err())
}

// snLoad runs A's senders until ctx ends: each posts an admitted event
// three times in four and a refused one the fourth.
func snLoad(ctx context.Context, a *Client, admitted, refused []byte, counts *snCounts) (wait func() error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for s := range snSenders {
		wg.Go(func() {
			for i := range snMaxPosts {
				isRefused := (i+s)%4 == 3
				body := admitted
				if isRefused {
					body = refused
				}
				ans, err := snPost(ctx, a, body)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				counts.add(isRefused, ans.status, ans.took)
				if ans.status == http.StatusTooManyRequests && !snWait(ctx, max(ans.retry, 100*time.Millisecond)) {
					return
				}
			}
		})
	}
	return func() error { wg.Wait(); return firstErr }
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// snCPUPerPost posts body n times in a row as a, waiting out 429s, and
// returns sluice's CPU per post answered want.
func snCPUPerPost(ctx context.Context, env *Env, a *Client, body []byte, n, want int) (time.Duration, error) {
	stop := env.measureCPU()
	for done := 0; done < n; {
		ans, err := snPost(ctx, a, body)
		if err != nil {
			return 0, err
		}
		switch ans.status {
		case want:
			done++
		case http.StatusTooManyRequests:
			if !snWait(ctx, max(ans.retry, 100*time.Millisecond)) {
				return 0, fmt.Errorf("wait out a 429: %w", ctx.Err())
			}
		default:
			return 0, fmt.Errorf("tenant A's post answered %d, want %d: %s", ans.status, want, ans.body)
		}
	}
	use := stop()
	return time.Duration(float64(use.sluice) / clockTick * float64(time.Second) / float64(n)), nil
}

func schemaNeighbour(ctx context.Context, env *Env) (Table, error) {
	phase := time.Duration(env.size(10, 3)) * time.Second
	metrics := []Metric{
		{Name: "B p50 beside A ÷ B p50 alone", Unit: "×", Target: 1.5, AtMost: true},
		{Name: "B p99 beside A ÷ B p99 alone", Unit: "×"},
		{Name: "B p50 alone", Unit: "ms"},
		{Name: "B p99 alone", Unit: "ms"},
		{Name: "B p50 beside A", Unit: "ms"},
		{Name: "B p99 beside A", Unit: "ms"},
		{Name: "sluice CPU per refused post of A", Unit: "ms"},
		{Name: "sluice CPU per admitted post of A", Unit: "ms"},
		{Name: "A's refused posts: p50 answer", Unit: "ms"},
		{Name: "A's refused posts: p99 answer", Unit: "ms"},
		{Name: "A posts accepted (202)", Unit: "posts"},
		{Name: "A posts refused on price (422)", Unit: "posts"},
		{Name: "A admitted posts refused by the deadline (422)", Unit: "posts"},
		{Name: "A posts answered 429", Unit: "posts"},
		{Name: "sluice CPU, B alone", Unit: "cores"},
		{Name: "sluice CPU, B beside A", Unit: "cores"},
	}
	schema := probeSchema()
	n, err := admittedLength(schema)
	if err != nil {
		return Table{}, err
	}
	n = n * 4 / 5
	admitted, refused := probeEvent(n), probeEvent(snProbeLen)
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		a, err := snTenant(ctx, env, fmt.Sprintf("bench-schema-a-r%d", run), apirate.DefaultRate)
		if err != nil {
			return s, err
		}
		b, err := snTenant(ctx, env, fmt.Sprintf("bench-schema-b-r%d", run), "")
		if err != nil {
			return s, err
		}
		if err := a.do(ctx, http.MethodPut, "/v1/event-types/"+snProbeType, []byte(`{"schema":`+schema+`}`), http.StatusCreated, nil); err != nil {
			return s, err
		}

		perRefused, err := snCPUPerPost(ctx, env, a, refused, 20, http.StatusUnprocessableEntity)
		if err != nil {
			return s, fmt.Errorf("refused posts: %w", err)
		}
		perAdmitted, err := snCPUPerPost(ctx, env, a, admitted, 3, http.StatusAccepted)
		if err != nil {
			return s, fmt.Errorf("admitted posts: %w", err)
		}
		s.Values["sluice CPU per refused post of A"] = ms(perRefused)
		s.Values["sluice CPU per admitted post of A"] = ms(perAdmitted)

		stop := env.measureCPU()
		alone, err := snSteady(ctx, b, phase)
		if err != nil {
			return s, fmt.Errorf("tenant B alone: %w", err)
		}
		cpuAlone := stop()

		var counts snCounts
		loadCtx, cancel := context.WithCancel(ctx)
		wait := snLoad(loadCtx, a, admitted, refused, &counts)
		stop = env.measureCPU()
		beside, err := snSteady(ctx, b, phase)
		cpuBeside := stop()
		cancel()
		if werr := wait(); err == nil && werr != nil && !errors.Is(werr, context.Canceled) {
			err = fmt.Errorf("tenant A's senders: %w", werr)
		}
		if err != nil {
			return s, fmt.Errorf("tenant B beside tenant A: %w", err)
		}

		p50a, p99a := percentile(alone, 50), percentile(alone, 99)
		p50b, p99b := percentile(beside, 50), percentile(beside, 99)
		s.Values["B p50 alone"], s.Values["B p99 alone"] = ms(p50a), ms(p99a)
		s.Values["B p50 beside A"], s.Values["B p99 beside A"] = ms(p50b), ms(p99b)
		if p50a > 0 && p99a > 0 {
			s.Values["B p50 beside A ÷ B p50 alone"] = float64(p50b) / float64(p50a)
			s.Values["B p99 beside A ÷ B p99 alone"] = float64(p99b) / float64(p99a)
		}
		s.Values["sluice CPU, B alone"] = cpuAlone.cores(cpuAlone.sluice)
		s.Values["sluice CPU, B beside A"] = cpuBeside.cores(cpuBeside.sluice)
		s.Values["A posts accepted (202)"] = float64(counts.accepted)
		s.Values["A posts refused on price (422)"] = float64(counts.priced)
		s.Values["A admitted posts refused by the deadline (422)"] = float64(counts.timed)
		s.Values["A posts answered 429"] = float64(counts.many)
		if len(counts.refusedTook) > 0 {
			s.Values["A's refused posts: p50 answer"] = ms(percentile(counts.refusedTook, 50))
			s.Values["A's refused posts: p99 answer"] = ms(percentile(counts.refusedTook, 99))
		}
		if len(counts.other) > 0 {
			s.Note = fmt.Sprintf("tenant A's other answers: %v", counts.other)
		}
		s.Note = joinNotes(s.Note, fmt.Sprintf("B: %d posts alone, %d beside A", len(alone), len(beside)))
		s.CPU = cpuBeside
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("admitted event: a string of %d characters (%d bytes posted); refused: %d characters (%d bytes); "+
		"phases of %s; A's rate %s", n+1, len(admitted), snProbeLen+1, len(refused), phase, apirate.DefaultRate))
	return t, err
}
