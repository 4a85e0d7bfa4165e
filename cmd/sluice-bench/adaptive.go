package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// Smart delivery: an adaptive endpoint against a receiver that takes less
// than the endpoint's rate limit and answers 429 above it.

const (
	adaptiveCapacity = 200  // what the receiver takes a second
	adaptiveRate     = 1000 // the endpoint's configured rate limit
)

var adaptiveWhat = fmt.Sprintf("A loopback receiver takes %d requests a second (a token bucket with bursts of %d) and answers "+
	"429 without Retry-After to the rest. One endpoint (max_in_flight 50) is rate-limited at %d/s with "+
	"`\"adaptive\": true`, and has a backlog of 1.3 × the window × %d/s events, posted up front in batches "+
	"of 1,000. Measured over the window (60 s, 15 s with -quick) from the first request: deliveries "+
	"answered 2xx a second as a %% of the receiver's capacity (≥ 80%%), the share of attempts answered 429 "+
	"(< 5%%), and when the rate settled: the end of the last one-second window that delivered under 80%% "+
	"of the capacity or had 5%% or more of its attempts answered 429 (≤ 10 s). The endpoint's "+
	"effective_rate is read at the end of the window.",
	adaptiveCapacity, adaptiveCapacity/10, adaptiveRate, adaptiveCapacity)

var adaptiveScenario = Scenario{
	Name:       "adaptive",
	Title:      "Smart delivery settles near what the receiver takes",
	What:       adaptiveWhat,
	Run:        adaptiveRun,
	MinTimeout: 2 * time.Minute,
}

var adaptive2WScenario = Scenario{
	Name:       "adaptive-2w",
	Title:      "Smart delivery with 2 worker processes",
	What:       adaptiveWhat + " Sluice runs as `serve --api --dashboard` beside 2 `serve --worker` processes, sharing the effective rate in Postgres.",
	Run:        adaptiveRun,
	MinTimeout: 2 * time.Minute,
	Workers:    2,
}

func adaptiveMetrics() []Metric {
	return []Metric{
		{Name: "delivered", Unit: "% of capacity", Target: 80},
		{Name: "attempts answered 429", Unit: "%", Target: 5, AtMost: true},
		{Name: "settled after", Unit: "s", Target: 10, AtMost: true},
		{Name: "effective_rate at the end", Unit: "/s"},
	}
}

// capacityAnswers makes rcv take perSecond requests a second with bursts
// of a tenth of that, answering 429 to the rest, and records each answer.
type capacityAnswers struct {
	mu      sync.Mutex
	pace    flow.Pace
	bucket  flow.Bucket
	answers []capacityAnswer
}

type capacityAnswer struct {
	at time.Time
	ok bool
}

func newCapacityAnswers(rcv *receiver.Receiver, perSecond float64) *capacityAnswers {
	c := &capacityAnswers{pace: flow.Pace{PerSecond: perSecond, Capacity: max(1, perSecond/10)}}
	rcv.AnswerFunc(func(int) receiver.Behavior {
		c.mu.Lock()
		defer c.mu.Unlock()
		now := time.Now()
		c.bucket = c.bucket.Refill(c.pace, now)
		ok := c.bucket.Available() > 0
		c.answers = append(c.answers, capacityAnswer{at: now, ok: ok})
		if !ok {
			return receiver.Behavior{Status: http.StatusTooManyRequests}
		}
		c.bucket = c.bucket.Take(1)
		return receiver.Behavior{}
	})
	return c
}

func (c *capacityAnswers) since(n int) []capacityAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]capacityAnswer(nil), c.answers[n:]...)
}

func (c *capacityAnswers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.answers)
}

func adaptiveRun(ctx context.Context, env *Env) (Table, error) {
	window := time.Duration(env.size(60, 15)) * time.Second
	receivers := newReceivers(1)
	defer receivers.Close()
	answers := newCapacityAnswers(receivers[0], adaptiveCapacity)
	t, err := env.Repeat(ctx, adaptiveMetrics(), func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		eventType := fmt.Sprintf("bench.adaptive.r%d", run)
		var ep struct {
			ID string `json:"id"`
		}
		ids, subs := make([]string, 1), make([]string, 1)
		defer func() { s.Note = joinNotes(s.Note, dropRateEndpoints(context.WithoutCancel(ctx), env.API, ids, subs)) }()
		body := map[string]any{
			"url":           fmt.Sprintf("%s/r%d", receivers[0].URL(), run),
			"max_in_flight": 50,
			"rate_limit":    map[string]any{"per_second": adaptiveRate, "adaptive": true},
		}
		if err := env.API.do(ctx, http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep); err != nil {
			return s, fmt.Errorf("create the endpoint: %w", err)
		}
		ids[0] = ep.ID
		if subs[0], err = env.API.Subscribe(ctx, ep.ID, eventType); err != nil {
			return s, fmt.Errorf("subscribe the endpoint: %w", err)
		}
		base := answers.count()
		n := int(1.3 * window.Seconds() * adaptiveCapacity)
		evs := make([]EventIn, n)
		for k := range evs {
			evs[k] = EventIn{Type: eventType, Payload: payload(0, k)}
		}
		for len(evs) > 0 {
			m := min(len(evs), 1000)
			if err := env.API.PostBatch(ctx, batchBody(evs[:m])); err != nil {
				return s, fmt.Errorf("post the backlog: %w", err)
			}
			evs = evs[m:]
		}
		if !receivers[0].Await(30*time.Second, func(reqs []receiver.Request) bool { return answers.count() > base }) {
			s.TimedOut = true
			return s, nil
		}
		first := answers.since(base)[0].at
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(time.Until(first.Add(window))):
		}
		var view struct {
			EffectiveRate *float64 `json:"effective_rate"`
		}
		if err := env.API.do(ctx, http.MethodGet, "/v1/endpoints/"+ep.ID, nil, http.StatusOK, &view); err == nil && view.EffectiveRate != nil {
			s.Values["effective_rate at the end"] = *view.EffectiveRate
		}
		m := measureAdaptive(answers.since(base), first, window)
		s.Values["delivered"] = 100 * m.delivered / window.Seconds() / adaptiveCapacity
		s.Values["attempts answered 429"] = 100 * m.throttledShare
		s.Values["settled after"] = m.settled.Seconds()
		s.Note = joinNotes(s.Note, fmt.Sprintf("%.0f delivered, %d attempts in the window", m.delivered, m.attempts))
		if len(m.unsettled) > 0 {
			s.Note = joinNotes(s.Note, "seconds under 80% or with 5% 429s: "+strings.Join(m.unsettled, "; "))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("window %s per run, receiver capacity %d/s, rate limit %d/s adaptive",
		window, adaptiveCapacity, adaptiveRate))
	return t, err
}

type adaptiveMeasure struct {
	delivered      float64
	attempts       int
	throttledShare float64
	settled        time.Duration
	unsettled      []string // each second that missed, "s12: 150 ok, 3 429"
}

// measureAdaptive reads the answers within [first, first+window): how many
// were 2xx, what share 429, and the end of the last one-second window that
// delivered under 80 % of the capacity or had 5 % or more 429s.
func measureAdaptive(answers []capacityAnswer, first time.Time, window time.Duration) adaptiveMeasure {
	secs := int(window / time.Second)
	ok, bad := make([]int, secs), make([]int, secs)
	var m adaptiveMeasure
	for _, a := range answers {
		i := int(a.at.Sub(first) / time.Second)
		if i < 0 || i >= secs {
			continue
		}
		m.attempts++
		if a.ok {
			ok[i]++
			m.delivered++
		} else {
			bad[i]++
		}
	}
	if m.attempts > 0 {
		m.throttledShare = float64(m.attempts-int(m.delivered)) / float64(m.attempts)
	}
	for i := range secs {
		if float64(ok[i]) < 0.8*adaptiveCapacity || float64(bad[i]) >= 0.05*float64(ok[i]+bad[i]) {
			m.settled = time.Duration(i+1) * time.Second
			m.unsettled = append(m.unsettled, fmt.Sprintf("s%d: %d ok, %d 429", i+1, ok[i], bad[i]))
		}
	}
	return m
}
