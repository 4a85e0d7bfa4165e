package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// Isolation: healthy endpoints' latency alone, then beside a throttled
// endpoint holding a large backlog and an endpoint whose receiver never
// answers in time.

var isolationScenario = Scenario{
	Name:  "isolation",
	Title: "Isolation from a throttled and a timing-out endpoint",
	What: "20 loopback receivers, one endpoint each (max_in_flight 100), get 500 events/s in total (a small batch " +
		"posted every 10 ms, as in latency) for 20 s per phase, after 2 s of unmeasured warm-up; latency = receipt " +
		"time − sent_ns over the first delivery of each event. 20 s gives a phase 10,000 deliveries, so that its " +
		"p99 is the 100th slowest: a stall of a few tens of ms anywhere on the box (a burst of replanning after " +
		"autovacuum analyzes a partition, say), which takes 15–20 deliveries, moves it no more in one phase than " +
		"in the other. Phase A: the healthy endpoints alone. Then a " +
		"throttled endpoint (max_in_flight 10) is posted 10,000 events (10 batches of 1000); its receiver answers " +
		"429 with `Retry-After: 3600` until GET /v1/endpoints/{id} says `throttled` with all of them queued, and " +
		"200 after that (so any request Sluice sent it while throttled would be delivered and counted). Phase B: " +
		"the same healthy load, with that backlog held and a timing-out endpoint (max_in_flight 10) posted a batch " +
		"of 10 events, then 20 events/s, from 4 s before phase B to its end; its receiver never answers (it waits " +
		"until Sluice gives up: the default 10 s delivery timeout), so its first attempts time out, and its circuit " +
		"opens, during phase B. Target: healthy p99 in B ≤ 1.2 × healthy p99 in A. Sluice's and Postgres's CPU is " +
		"measured over 5 s idle windows, before anything is queued and while only the throttled backlog is, and " +
		"over each phase (first post → last delivery): what the throttled backlog costs while it waits. At the end " +
		"of a run the bad endpoints' subscriptions are deleted and the timing-out endpoint is disabled; the " +
		"throttled backlog stays queued (the quiescence check before later runs ignores both endpoints).",
	Run: isolation,
}

const (
	isoHealthy     = 20
	isoMaxInFlight = 100
	isoBadInFlight = 10 // the API's default
	isoRate        = 500.0
	isoTimeoutRate = 20.0
	isoLeadIn      = 4 * time.Second // timing-out stream before phase B
	isoWarmUp      = 2 * time.Second // healthy load before anything is measured
	isoRetryAfter  = "3600"
)

func isolation(ctx context.Context, env *Env) (Table, error) {
	duration := time.Duration(env.size(20, 3)) * time.Second
	idle := time.Duration(env.size(5, 2)) * time.Second
	backlog := env.size(10000, 2000)
	metrics := []Metric{
		{Name: "healthy p99, B ÷ A", Unit: "×", Target: 1.2, AtMost: true},
		{Name: "healthy p50, A alone", Unit: "ms"},
		{Name: "healthy p99, A alone", Unit: "ms"},
		{Name: "healthy p50, B with neighbours", Unit: "ms"},
		{Name: "healthy p99, B with neighbours", Unit: "ms"},
		{Name: "throttled endpoint queued at end", Unit: "deliveries", Target: float64(backlog)},
		{Name: "throttled receiver requests while throttled", Unit: "requests"},
		{Name: "timing-out receiver requests", Unit: "requests"},
		{Name: "sluice CPU, idle", Unit: "cores"},
		{Name: "sluice CPU, idle + throttled backlog", Unit: "cores"},
		{Name: "sluice CPU, A", Unit: "cores"},
		{Name: "sluice CPU, B", Unit: "cores"},
		{Name: "Postgres CPU, idle", Unit: "cores"},
		{Name: "Postgres CPU, idle + throttled backlog", Unit: "cores"},
		{Name: "Postgres CPU, A", Unit: "cores"},
		{Name: "Postgres CPU, B", Unit: "cores"},
	}
	receivers := newReceivers(isoHealthy)
	defer receivers.Close()
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		sinks, err := newSinks(ctx, env.API, receivers, isoMaxInFlight, func(i int) string {
			return fmt.Sprintf("bench.isolation.r%d.%d", run, i)
		})
		if err != nil {
			return s, fmt.Errorf("set up endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		bad, err := newNeighbours(ctx, env, run)
		if err != nil {
			return s, fmt.Errorf("set up the bad endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, bad.close(context.WithoutCancel(ctx), env.API)) }()
		cpuValues := func(label string, u cpuUse) {
			s.Values["sluice CPU, "+label] = u.cores(u.sluice)
			if u.postgresKnown {
				s.Values["Postgres CPU, "+label] = u.cores(u.postgres)
			}
		}

		if _, err := healthyPhase(ctx, env, sinks, isoWarmUp); err != nil {
			return s, fmt.Errorf("warm-up: %w", err)
		}
		cpuValues("idle", env.idleCPU(ctx, idle))
		a, err := healthyPhase(ctx, env, sinks, duration)
		if err != nil {
			return s, fmt.Errorf("phase A: %w", err)
		}

		note, err := bad.fillThrottled(ctx, env.API, backlog)
		s.Note = joinNotes(s.Note, note)
		if err != nil {
			return s, err
		}
		cpuValues("idle + throttled backlog", env.idleCPU(ctx, idle))

		slowStart := time.Now()
		stopSlow := trickle(ctx, env.API, bad.slowType, isoTimeoutRate, isoBadInFlight)
		select {
		case <-ctx.Done():
		case <-time.After(isoLeadIn):
		}
		b, err := healthyPhase(ctx, env, sinks, duration)
		slowPosted, slowErr := stopSlow()
		if err != nil {
			return s, fmt.Errorf("phase B: %w", err)
		}
		if slowErr != nil {
			s.Note = joinNotes(s.Note, "posting to the timing-out endpoint: "+slowErr.Error())
		}
		whileThrottled := bad.throttled.Count() - bad.throttledBase
		slowRequests := bad.slow.Count()

		for name, v := range map[string]float64{
			"healthy p50, A alone":           a.lat.Values["p50"],
			"healthy p99, A alone":           a.lat.Values["p99"],
			"healthy p50, B with neighbours": b.lat.Values["p50"],
			"healthy p99, B with neighbours": b.lat.Values["p99"],
		} {
			s.Values[name] = v
		}
		if a.lat.Values["p99"] > 0 {
			s.Values["healthy p99, B ÷ A"] = b.lat.Values["p99"] / a.lat.Values["p99"]
		}
		cpuValues("A", a.cpu)
		cpuValues("B", b.cpu)
		s.CPU = a.cpu.add(b.cpu)
		s.TimedOut = a.lat.TimedOut || b.lat.TimedOut
		for _, p := range []struct {
			name string
			ph   isoPhase
		}{{"phase A", a}, {"phase B", b}} {
			if p.ph.lat.Note != "" {
				s.Note = joinNotes(s.Note, p.name+": "+p.ph.lat.Note)
			}
			if p.ph.skipped > 0 {
				s.Note = joinNotes(s.Note, fmt.Sprintf("%s: load generator skipped %d ticks", p.name, p.ph.skipped))
			}
		}

		s.Values["throttled receiver requests while throttled"] = float64(whileThrottled)
		s.Values["timing-out receiver requests"] = float64(slowRequests)
		thr, err := getEndpoint(ctx, env.API, bad.throttledID)
		if err != nil {
			return s, fmt.Errorf("read the throttled endpoint: %w", err)
		}
		s.Values["throttled endpoint queued at end"] = float64(thr.QueuedDeliveries)
		slow, err := getEndpoint(ctx, env.API, bad.slowID)
		if err != nil {
			return s, fmt.Errorf("read the timing-out endpoint: %w", err)
		}
		s.Note = joinNotes(s.Note, fmt.Sprintf("at the end the throttled endpoint was %s; its receiver got %d "+
			"requests before it was throttled, %d after", thr.describe(), bad.throttledBase, whileThrottled))
		s.Note = joinNotes(s.Note, fmt.Sprintf("the timing-out endpoint was %s (circuit %s, %d consecutive failures, "+
			"%d queued) after %d events posted to it; its receiver's requests by second after the first post: %s",
			slow.Status, slow.Circuit.State, slow.Circuit.ConsecutiveFailures, slow.QueuedDeliveries, slowPosted,
			requestTimes(bad.slow.Requests(), slowStart)))
		if whileThrottled > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("**the throttled endpoint got %d requests while throttled**", whileThrottled))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("offered load %.0f events/s over %d healthy endpoints for %s per phase; "+
		"throttled backlog %d events; timing-out stream %.0f events/s", isoRate, isoHealthy, duration, backlog, isoTimeoutRate))
	return t, err
}

// isoPhase is one phase's healthy load: latency of the deliveries made
// during it, and CPU from its first post to its last delivery.
type isoPhase struct {
	lat     Sample
	cpu     cpuUse
	skipped int
}

// healthyPhase offers the healthy load for duration and waits (at most
// 15 s more) for its deliveries.
func healthyPhase(ctx context.Context, env *Env, sinks *Sinks, duration time.Duration) (p isoPhase, err error) {
	return healthyPhaseAt(ctx, env, sinks, isoRate, duration)
}

// healthyPhaseAt is healthyPhase at rate events/s.
func healthyPhaseAt(ctx context.Context, env *Env, sinks *Sinks, rate float64, duration time.Duration) (p isoPhase, err error) {
	view := sinks.from()
	cpu := env.measureCPU()
	start := time.Now()
	accepted, skipped, err := offerLoad(ctx, env.API, sinks.Types, rate, duration)
	if err != nil {
		return p, err
	}
	drainCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	arr := view.Await(drainCtx, accepted)
	cancel()
	p.cpu = cpu()
	p.lat = latencySample(arr, accepted, start)
	p.skipped = skipped
	return p, nil
}

// from is a view of s that counts only the requests received from now on.
// It shares s's subscriptions: close s, not the view.
func (s *Sinks) from() *Sinks {
	v := *s
	v.base = make([]int, len(s.receivers))
	for i, r := range s.receivers {
		v.base[i] = r.Count()
	}
	return &v
}

// trickle posts a batch of burst events of typ at once, then one event
// every 1/rate s (at most 10,000) until the returned stop is called; stop
// returns how many were accepted and the first error.
func trickle(ctx context.Context, api *Client, typ string, rate float64, burst int) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var (
		ok       int
		firstErr error
	)
	go func() {
		defer close(done)
		evs := make([]EventIn, burst)
		for i := range evs {
			evs[i] = EventIn{Type: typ, Payload: payload(time.Now().UnixNano(), i)}
		}
		if err := api.PostBatch(ctx, batchBody(evs)); err != nil {
			firstErr = err
		} else {
			ok += burst
		}
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for seq := range 10000 {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := api.PostEvent(ctx, eventBody(EventIn{Type: typ, Payload: payload(time.Now().UnixNano(), burst+seq)}))
			switch {
			case err == nil:
				ok++
			case ctx.Err() == nil && firstErr == nil:
				firstErr = err
			}
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return ok, firstErr
	}
}

// idleCPU measures CPU use over d with no load offered.
func (e *Env) idleCPU(ctx context.Context, d time.Duration) cpuUse {
	stop := e.measureCPU()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return stop()
}

// neighbours are one run's bad endpoints: a throttled one and one whose
// receiver never answers within the delivery timeout. Their receivers
// live for the run only.
type neighbours struct {
	throttled, slow         *receiver.Receiver
	throttledType, slowType string
	throttledID, slowID     string
	throttledSub, slowSub   string
	throttling              atomic.Bool // the throttled receiver answers 429 while set
	throttledBase           int         // its requests until it was seen throttled
}

func newNeighbours(ctx context.Context, env *Env, run int) (*neighbours, error) {
	n := &neighbours{
		throttled:     receiver.New(nil),
		slow:          receiver.New(nil),
		throttledType: fmt.Sprintf("bench.isolation.r%d.throttled", run),
		slowType:      fmt.Sprintf("bench.isolation.r%d.timeout", run),
	}
	n.throttling.Store(true)
	n.throttled.AnswerFunc(func(int) receiver.Behavior {
		if n.throttling.Load() {
			return receiver.Behavior{Status: http.StatusTooManyRequests, RetryAfter: isoRetryAfter}
		}
		return receiver.Behavior{}
	})
	// Never answer: wait until Sluice gives up on the request (its delivery
	// timeout) or the receiver is closed.
	n.slow.Answer(receiver.Behavior{Delay: time.Hour})

	var err error
	if n.throttledID, err = env.API.CreateEndpoint(ctx, n.throttled.URL(), isoBadInFlight); err == nil {
		env.Blocked = append(env.Blocked, n.throttledID)
		if n.slowID, err = env.API.CreateEndpoint(ctx, n.slow.URL(), isoBadInFlight); err == nil {
			env.Blocked = append(env.Blocked, n.slowID)
			if n.throttledSub, err = env.API.Subscribe(ctx, n.throttledID, n.throttledType); err == nil {
				n.slowSub, err = env.API.Subscribe(ctx, n.slowID, n.slowType)
			}
		}
	}
	if err != nil {
		if note := n.close(context.WithoutCancel(ctx), env.API); note != "" {
			err = fmt.Errorf("%w; %s", err, note)
		}
		return nil, err
	}
	return n, nil
}

// fillThrottled posts backlog events to the throttled endpoint and waits
// until it is throttled with all of them queued; from then on its receiver
// answers 200.
func (n *neighbours) fillThrottled(ctx context.Context, api *Client, backlog int) (note string, err error) {
	var bodies [][]byte
	for first := 0; first < backlog; first += 1000 {
		evs := make([]EventIn, min(1000, backlog-first))
		for j := range evs {
			evs[j] = EventIn{Type: n.throttledType, Payload: payload(0, first+j)}
		}
		bodies = append(bodies, batchBody(evs))
	}
	if res := postAll(ctx, bodies, 2, api.PostBatch); res.failed > 0 || res.ok < len(bodies) {
		return "", fmt.Errorf("posting the throttled backlog: %d of %d batches accepted; %s", res.ok, len(bodies), res.note())
	}
	t0 := time.Now()
	deadline := t0.Add(30 * time.Second)
	for {
		st, err := getEndpoint(ctx, api, n.throttledID)
		if err != nil {
			return "", fmt.Errorf("read the throttled endpoint: %w", err)
		}
		done := st.Status == "throttled" && st.QueuedDeliveries >= backlog
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			n.throttling.Store(false)
			n.throttledBase = n.throttled.Count()
			switch {
			case done:
				return "", nil
			case st.Status == "throttled":
				return fmt.Sprintf("throttled endpoint had only %d of %d deliveries queued %s after the backlog was posted",
					st.QueuedDeliveries, backlog, time.Since(t0).Round(time.Millisecond)), nil
			default:
				return "", fmt.Errorf("throttled endpoint not throttled %s after its backlog was posted: status %q, %d queued, %d requests to its receiver",
					time.Since(t0).Round(time.Millisecond), st.Status, st.QueuedDeliveries, n.throttledBase)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close deletes the bad endpoints' subscriptions, disables the timing-out
// endpoint (so it sends no more probes or retries) and stops the
// receivers. The throttled endpoint keeps its backlog, throttled.
func (n *neighbours) close(ctx context.Context, api *Client) string {
	var errs []error
	if n.slowID != "" {
		errs = append(errs, api.do(ctx, http.MethodPatch, "/v1/endpoints/"+n.slowID,
			map[string]any{"disabled": true}, http.StatusOK, nil))
	}
	for _, sub := range []string{n.throttledSub, n.slowSub} {
		if sub != "" {
			errs = append(errs, api.DeleteSubscription(ctx, sub))
		}
	}
	n.throttled.Close()
	n.slow.Close()
	if err := errors.Join(errs...); err != nil {
		return "cleaning up the bad endpoints: " + err.Error()
	}
	return ""
}

// endpointState is what the scenario reads of GET /v1/endpoints/{id}.
type endpointState struct {
	Status           string     `json:"status"`
	ThrottledUntil   *time.Time `json:"throttled_until"`
	ThrottleReason   *string    `json:"throttle_reason"`
	QueuedDeliveries int        `json:"queued_deliveries"`
	Circuit          struct {
		State               string `json:"state"`
		ConsecutiveFailures int    `json:"consecutive_failures"`
	} `json:"circuit"`
}

func getEndpoint(ctx context.Context, api *Client, id string) (endpointState, error) {
	var st endpointState
	err := api.do(ctx, http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &st)
	return st, err
}

func (st endpointState) describe() string {
	s := fmt.Sprintf("%s with %d queued", st.Status, st.QueuedDeliveries)
	if st.ThrottledUntil != nil {
		s += fmt.Sprintf(", throttled for %s more", time.Until(*st.ThrottledUntil).Round(time.Second))
	}
	if st.ThrottleReason != nil && *st.ThrottleReason != "" {
		s += fmt.Sprintf(" (%s)", *st.ThrottleReason)
	}
	return s
}

// requestTimes lists how many requests arrived in each second after from,
// e.g. "0s: 10, 10s: 10".
func requestTimes(reqs []receiver.Request, from time.Time) string {
	counts := map[int]int{}
	var secs []int
	for _, r := range reqs {
		sec := int(r.At.Sub(from) / time.Second)
		if counts[sec] == 0 {
			secs = append(secs, sec)
		}
		counts[sec]++
	}
	slices.Sort(secs)
	parts := make([]string, len(secs))
	for i, sec := range secs {
		parts[i] = fmt.Sprintf("%ds: %d", sec, counts[sec])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
