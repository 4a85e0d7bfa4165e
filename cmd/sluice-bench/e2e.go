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
		"deliveries ÷ (first post sent → last delivery received); CPU per event = CPU over that time ÷ events. " +
		"Then the floor, for scale, in the same run once Postgres is idle again: the same posts from the same 64 " +
		"clients to a process doing the least a webhook post takes (insert the body with a synchronous commit, " +
		"answer 202, post it to a receiver, mark it sent with an asynchronous commit; cmd/sluice-bench/floor.go), " +
		"measured the same way (Sluice idles meanwhile). Targets from the scale issue: ≥ 4,000 events/s and " +
		"Postgres CPU ≤ 0.25 ms an event; from the lean issue, run by run against the floor: ≥ 0.95× its " +
		"throughput and ≤ 1.3× its Postgres CPU per event.",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return e2eWith(ctx, env, e2eLoad{label: "e2esingle", endpoints: 100, events: env.size(20000, 4000),
			target: 4000, perRequest: 1, clients: 64, floor: true})
	},
}

// e2eLoad is what an end-to-end scenario posts, and how.
type e2eLoad struct {
	label      string  // in the event types
	endpoints  int     // one receiver each
	events     int     // a run's
	target     float64 // deliveries/s; 0: none
	perRequest int     // 1: POST /v1/events; more: /v1/events/batch
	clients    int     // concurrent senders
	floor      bool    // post the same to the floor too (floor.go)
	cost       bool    // CPU, statements and duplicates per delivery (costMetrics)
	// features are what every endpoint uses beyond a plain one (costs.go).
	features sinkFeatures
	// lines, when not 0, gives event k the ordering_key "line-(k mod lines)".
	lines int
	// measuring, when set, is called as the first post is about to be
	// sent, and measured once the last delivery is in (or the run timed
	// out), before the floor and before the endpoints go.
	measuring func(ctx context.Context)
	measured  func(ctx context.Context, s *Sample, deliveries int) error
}

// e2e posts events in batches of 1000 (4 clients) spread over endpoints
// sinks and measures deliveries/s against target (0: none).
func e2e(ctx context.Context, env *Env, label string, endpoints, events int, target float64) (Table, error) {
	return e2eWith(ctx, env, e2eLoad{label: label, endpoints: endpoints, events: events, target: target,
		perRequest: 1000, clients: 4})
}

// e2eMetrics are an end-to-end scenario's, the floor's with load.floor.
func e2eMetrics(load e2eLoad) []Metric {
	metrics := []Metric{{Name: "throughput", Unit: "deliveries/s", Target: load.target}}
	if load.floor {
		metrics = append(metrics,
			Metric{Name: "Postgres CPU per event", Unit: "ms", Target: 0.25, AtMost: true},
			Metric{Name: "Sluice CPU per event", Unit: "ms"},
			Metric{Name: "the floor: throughput", Unit: "deliveries/s"},
			Metric{Name: "the floor: Postgres CPU per event", Unit: "ms"},
			Metric{Name: "the floor: its process's CPU per event", Unit: "ms"},
			Metric{Name: "throughput ÷ the floor's", Unit: "×", Target: 0.95},
			Metric{Name: "Postgres CPU per event ÷ the floor's", Unit: "×", Target: 1.3, AtMost: true})
	}
	if load.cost {
		metrics = append(metrics, costMetrics...)
	}
	return append(metrics, Metric{Name: "posting done", Unit: "s"}, Metric{Name: "last delivery", Unit: "s"})
}

// e2eWith runs load against Sluice, and against the floor when load.floor.
func e2eWith(ctx context.Context, env *Env, load e2eLoad) (Table, error) {
	receivers := newReceivers(load.endpoints)
	defer receivers.Close()
	t, err := env.Repeat(ctx, e2eMetrics(load), func(ctx context.Context, run int) (Sample, error) {
		return e2eOnce(ctx, env, load, receivers, run)
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run over %d endpoint(s), max_in_flight %d, %d per request from %d clients",
		load.events, load.endpoints, e2eMaxInFlight, load.perRequest, load.clients))
	return t, err
}

// e2eMaxInFlight is every e2e endpoint's max_in_flight.
const e2eMaxInFlight = 100

// e2eOnce is one run of load, on endpoints of its own behind receivers.
func e2eOnce(ctx context.Context, env *Env, load e2eLoad, receivers Receivers, run int) (s Sample, err error) {
	sinks, err := newSinksUsing(ctx, env.API, receivers, e2eMaxInFlight, func(i int) string {
		return fmt.Sprintf("bench.%s.r%d.%d", load.label, run, i)
	}, load.features)
	if err != nil {
		return s, fmt.Errorf("set up endpoints: %w", err)
	}
	defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()

	var bodies [][]byte
	post := env.API.PostBatch
	for first := 0; first < load.events; first += load.perRequest {
		evs := make([]EventIn, min(load.perRequest, load.events-first))
		for j := range evs {
			k := first + j
			evs[j] = EventIn{Type: sinks.Types[k%load.endpoints], Payload: payload(0, k)}
			if load.lines > 0 {
				evs[j].OrderingKey = fmt.Sprintf("line-%d", k%load.lines)
			}
		}
		if load.perRequest == 1 {
			bodies, post = append(bodies, eventBody(evs[0])), env.API.PostEvent
			continue
		}
		bodies = append(bodies, batchBody(evs))
	}

	statements := env.statements(ctx, load.cost)
	cpu := env.measureCPU()
	if load.measuring != nil {
		load.measuring(ctx)
	}
	awaitCtx, stopAwait := context.WithCancel(ctx)
	defer stopAwait()
	posted := make(chan postResult, 1)
	go func() {
		res := postAll(ctx, bodies, load.clients, post)
		if res.failed > 0 {
			stopAwait()
		}
		posted <- res
	}()
	arr := sinks.Await(awaitCtx, load.events)
	res := <-posted
	if res.failed > 0 {
		return s, fmt.Errorf("posting events: %s", res.note())
	}
	s = throughputSample(ctx, res, arr, load.events)
	s.CPU = cpu()
	if load.cost {
		costValues(ctx, &s, arr, statements)
	}
	if load.measured != nil {
		if err := load.measured(ctx, &s, arr.Unique); err != nil {
			return s, err
		}
	}
	if load.floor {
		s.Values["Postgres CPU per event"] = perEvent(s.CPU.postgres, load.events)
		s.Values["Sluice CPU per event"] = perEvent(s.CPU.sluice, load.events)
		if err := e2eFloor(ctx, env, bodies, load, &s); err != nil {
			return s, fmt.Errorf("the floor: %w", err)
		}
	}
	return s, nil
}

// e2eFloor posts bodies to the floor as e2eWith did to Sluice, once
// Postgres is idle again, and adds its readings to s.
func e2eFloor(ctx context.Context, env *Env, bodies [][]byte, load e2eLoad, s *Sample) error {
	if note := env.waitIdle(ctx, 30*time.Second); note != "" {
		s.Note = joinNotes(s.Note, "before the floor: "+note)
	}
	f, err := startFloorProc(ctx, env)
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	before := readCPU(f.procs(env))
	res := postAll(ctx, bodies, load.clients, postFloor(f.url))
	if res.failed > 0 {
		return fmt.Errorf("posting: %s", res.note())
	}
	last := f.await(load.events, time.Minute)
	use := readCPU(f.procs(env)).since(before)
	if last.IsZero() {
		return fmt.Errorf("%d of %d posts reached its receiver within a minute", f.got.Load(), load.events)
	}
	rate := float64(load.events) / last.Sub(res.start).Seconds()
	s.Values["the floor: throughput"] = rate
	s.Values["the floor: Postgres CPU per event"] = perEvent(use.postgres, load.events)
	s.Values["the floor: its process's CPU per event"] = perEvent(use.sluice, load.events)
	s.Values["throughput ÷ the floor's"] = s.Values["throughput"] / rate
	if floorPG := s.Values["the floor: Postgres CPU per event"]; floorPG > 0 {
		s.Values["Postgres CPU per event ÷ the floor's"] = s.Values["Postgres CPU per event"] / floorPG
	}
	return nil
}

// perEvent is CPU time in jiffies spread over events, in ms an event.
func perEvent(jiffies uint64, events int) float64 {
	return float64(jiffies) / clockTick * 1000 / float64(events)
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
