package main

import (
	"context"
	"fmt"
	"time"
)

// End-to-end throughput scenarios: events posted in batches (or one per
// request, the way most customers send), each matching exactly one
// endpoint, measured from the first post to the last delivery received.

var e2eOneScenario = Scenario{
	Name:  "e2e-1",
	Title: "End to end, 1 endpoint",
	What: "One loopback receiver behind one endpoint (max_in_flight 100, the API maximum); events posted through " +
		"/v1/events/batch (1000 per request, 4 clients), all matching that endpoint; deliveries/s = distinct " +
		"deliveries ÷ (first post sent → last delivery received).",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return e2e(ctx, env, "e2e1", 1, env.size(10000, 2000), 0)
	},
}

var e2eHundredScenario = Scenario{
	Name:  "e2e-100",
	Title: "End to end, 100 endpoints",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100); events posted through /v1/events/batch " +
		"(1000 per request, 4 clients), event i of type bench.e2e100.r<run>.<i mod 100> matching exactly one endpoint; " +
		"deliveries/s = distinct deliveries ÷ (first post sent → last delivery received).",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		t, err := e2e(ctx, env, "e2e100", 100, env.size(20000, 4000), 5000)
		for _, r := range t.Rows {
			if r.Metric.Name == "throughput" && !r.TimedOut {
				env.E2EHundredRate = r.Median
			}
		}
		return t, err
	},
}

var e2eSingleScenario = Scenario{
	Name:  "e2e-single",
	Title: "End to end, single posts, 100 endpoints",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100); events posted one per request to " +
		"/v1/events by 64 concurrent clients, event i matching exactly endpoint i mod 100; deliveries/s = distinct " +
		"deliveries ÷ (first post sent → last delivery received).",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return e2eWith(ctx, env, "e2esingle", 100, env.size(20000, 4000), 4000, 1, 64)
	},
}

// e2e posts events in batches of 1000 (4 clients) spread over endpoints
// sinks and measures deliveries/s against target (0: none).
func e2e(ctx context.Context, env *Env, label string, endpoints, events int, target float64) (Table, error) {
	return e2eWith(ctx, env, label, endpoints, events, target, 1000, 4)
}

// e2eWith is e2e with perRequest events a request (1: POST /v1/events) from
// clients concurrent senders.
func e2eWith(ctx context.Context, env *Env, label string, endpoints, events int, target float64, perRequest, clients int) (Table, error) {
	const maxInFlight = 100
	metrics := []Metric{
		{Name: "throughput", Unit: "deliveries/s", Target: target},
		{Name: "posting done", Unit: "s"},
		{Name: "last delivery", Unit: "s"},
	}
	receivers := newReceivers(endpoints)
	defer receivers.Close()
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		sinks, err := newSinks(ctx, env.API, receivers, maxInFlight, func(i int) string {
			return fmt.Sprintf("bench.%s.r%d.%d", label, run, i)
		})
		if err != nil {
			return s, fmt.Errorf("set up endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()

		var bodies [][]byte
		post := env.API.PostBatch
		for first := 0; first < events; first += perRequest {
			evs := make([]EventIn, min(perRequest, events-first))
			for j := range evs {
				k := first + j
				evs[j] = EventIn{Type: sinks.Types[k%endpoints], Payload: payload(0, k)}
			}
			if perRequest == 1 {
				bodies, post = append(bodies, eventBody(evs[0])), env.API.PostEvent
				continue
			}
			bodies = append(bodies, batchBody(evs))
		}

		cpu := env.measureCPU()
		awaitCtx, stopAwait := context.WithCancel(ctx)
		defer stopAwait()
		posted := make(chan postResult, 1)
		go func() {
			res := postAll(ctx, bodies, clients, post)
			if res.failed > 0 {
				stopAwait()
			}
			posted <- res
		}()
		arr := sinks.Await(awaitCtx, events)
		res := <-posted
		if res.failed > 0 {
			return s, fmt.Errorf("posting events: %s", res.note())
		}
		s = throughputSample(ctx, res, arr, events)
		s.CPU = cpu()
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run over %d endpoint(s), max_in_flight %d, %d per request from %d clients",
		events, endpoints, maxInFlight, perRequest, clients))
	return t, err
}

// throughputSample measures deliveries/s of a run that meant to deliver want.
func throughputSample(ctx context.Context, res postResult, arr Arrival, want int) Sample {
	end := arr.Last
	complete := arr.Unique >= want
	if !complete {
		end = time.Now()
	}
	elapsed := end.Sub(res.start)
	s := Sample{
		Values: map[string]float64{
			"throughput":    float64(arr.Unique) / elapsed.Seconds(),
			"posting done":  res.end.Sub(res.start).Seconds(),
			"last delivery": elapsed.Seconds(),
		},
		TimedOut: !complete,
	}
	if !complete {
		s.Note = fmt.Sprintf("timed out after %s: %d of %d deliveries received", elapsed.Round(time.Millisecond), arr.Unique, want)
		if ctx.Err() == nil {
			s.Note = fmt.Sprintf("stopped after %s: %d of %d deliveries received", elapsed.Round(time.Millisecond), arr.Unique, want)
		}
	}
	if arr.Duplicates > 0 {
		s.Note = joinNotes(s.Note, fmt.Sprintf("%d duplicate deliveries", arr.Duplicates))
	}
	return s
}
