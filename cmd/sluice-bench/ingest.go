package main

import (
	"context"
	"fmt"
	"time"
)

// Ingest scenarios: how fast the API accepts events when nothing is
// subscribed to them (their fan-out finds no endpoint).

var ingestBatchScenario = Scenario{
	Name:  "ingest-batch",
	Title: "Ingest, batch",
	What: "POST /v1/events/batch with 1000 events of ~200-byte payload per request, 6 concurrent clients, " +
		"no subscription matching; events/s = events accepted ÷ (first request sent → last 202 received).",
	Run: ingestBatch,
}

var ingestSingleScenario = Scenario{
	Name:  "ingest-single",
	Title: "Ingest, single events",
	What: "POST /v1/events, one event of ~200-byte payload per request, 48 concurrent clients, " +
		"no subscription matching; events/s = events accepted ÷ (first request sent → last 202 received).",
	Run: ingestSingle,
}

func ingestBatch(ctx context.Context, env *Env) (Table, error) {
	requests, perRequest, clients := env.size(20, 4), 1000, 6
	metrics := []Metric{
		{Name: "throughput", Unit: "events/s", Target: 20000},
		{Name: "request p50", Unit: "ms"},
		{Name: "request p99", Unit: "ms"},
	}
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (Sample, error) {
		typ := fmt.Sprintf("bench.ingest.batch.r%d", run)
		bodies := make([][]byte, requests)
		for i := range bodies {
			evs := make([]EventIn, perRequest)
			for j := range evs {
				evs[j] = EventIn{Type: typ, Payload: payload(0, i*perRequest+j)}
			}
			bodies[i] = batchBody(evs)
		}
		res := postAll(ctx, bodies, clients, env.API.PostBatch)
		return ingestSample(ctx, res, perRequest, requests)
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d requests × %d events per run, %d clients", requests, perRequest, clients))
	return t, err
}

func ingestSingle(ctx context.Context, env *Env) (Table, error) {
	events, clients := env.size(10000, 1000), 48
	metrics := []Metric{
		{Name: "throughput", Unit: "events/s", Target: 3000},
		{Name: "request p50", Unit: "ms"},
		{Name: "request p99", Unit: "ms"},
	}
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (Sample, error) {
		typ := fmt.Sprintf("bench.ingest.single.r%d", run)
		bodies := make([][]byte, events)
		for i := range bodies {
			bodies[i] = eventBody(EventIn{Type: typ, Payload: payload(0, i)})
		}
		res := postAll(ctx, bodies, clients, env.API.PostEvent)
		return ingestSample(ctx, res, 1, events)
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run, %d clients", events, clients))
	return t, err
}

// ingestSample turns a posting result into a sample; want is the number of
// requests meant to be sent.
func ingestSample(ctx context.Context, res postResult, perRequest, want int) (Sample, error) {
	if res.ok == 0 && res.failed > 0 {
		return Sample{}, fmt.Errorf("every request failed: %w", res.firstErr)
	}
	elapsed := res.end.Sub(res.start)
	s := Sample{
		Values: map[string]float64{
			"throughput":  float64(res.ok*perRequest) / elapsed.Seconds(),
			"request p50": ms(percentile(res.latencies, 50)),
			"request p99": ms(percentile(res.latencies, 99)),
		},
		TimedOut: timedOut(ctx),
		Note:     res.note(),
	}
	if s.TimedOut {
		s.Note = joinNotes(fmt.Sprintf("timed out after %s with %d of %d requests accepted",
			elapsed.Round(time.Millisecond), res.ok, want), s.Note)
	}
	return s, nil
}
