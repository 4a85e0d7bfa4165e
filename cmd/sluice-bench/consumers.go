package main

import (
	"context"
	"fmt"
)

// The consumers scenarios measure what routing by consumer costs: 1,000
// consumers with one endpoint each, every endpoint subscribed to the same
// event type, and every event addressed to one consumer, so each event
// reaches exactly one endpoint only because of its consumer.
const benchConsumers = 1000

var consumersIngestScenario = Scenario{
	Name:  "consumers-ingest",
	Title: "Ingest, single events addressed to 1,000 consumers",
	What: "POST /v1/events, one event of ~200-byte payload per request, 48 concurrent clients, event i addressed to " +
		"consumer i mod 1000 (each with one endpoint, all subscribed to the type); events/s = events accepted ÷ " +
		"(first request sent → last 202 received). Compare ingest-single (no consumer, no subscription).",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return consumersRun(ctx, env, "ingest", env.size(10000, 1000))
	},
}

var consumersE2EScenario = Scenario{
	Name:  "consumers-e2e",
	Title: "End to end, 1,000 consumers",
	What: "1,000 consumers with one endpoint each (max_in_flight 100) on 100 loopback receivers; events posted through " +
		"/v1/events/batch (1000 per request, 4 clients), event i addressed to consumer i mod 1000; deliveries/s = " +
		"distinct deliveries ÷ (first post sent → last delivery received). Compare e2e-100.",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return consumersRun(ctx, env, "e2e", env.size(20000, 4000))
	},
}

// consumersRun posts events addressed to the consumers, singly (mode
// "ingest", measuring acceptance) or in batches ("e2e", measuring delivery).
func consumersRun(ctx context.Context, env *Env, mode string, events int) (Table, error) {
	const maxInFlight, batch = 100, 1000
	if err := parallel(benchConsumers, 8, func(i int) error { return env.API.PutConsumer(ctx, consumerUID(i)) }); err != nil {
		return Table{}, fmt.Errorf("create consumers: %w", err)
	}
	metrics := []Metric{{Name: "throughput", Unit: "deliveries/s"}, {Name: "posting done", Unit: "s"}, {Name: "last delivery", Unit: "s"}}
	if mode == "ingest" {
		metrics = []Metric{{Name: "throughput", Unit: "events/s"}, {Name: "request p50", Unit: "ms"}, {Name: "request p99", Unit: "ms"}}
	}
	receivers := newReceivers(benchConsumers / 10) // ten consumers' endpoints each: 1,000 listeners run out of descriptors
	defer receivers.Close()
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		typ := fmt.Sprintf("bench.consumers.%s.r%d", mode, run)
		sinks, err := newConsumerSinks(ctx, env.API, receivers, benchConsumers, maxInFlight,
			func(int) string { return typ }, consumerUID)
		if err != nil {
			return s, fmt.Errorf("set up endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		evs := make([]EventIn, events)
		for k := range evs {
			evs[k] = EventIn{Type: typ, Payload: payload(0, k), Consumer: consumerUID(k % benchConsumers)}
		}
		cpu := env.measureCPU()
		if mode == "ingest" {
			bodies := make([][]byte, events)
			for k, ev := range evs {
				bodies[k] = eventBody(ev)
			}
			res := postAll(ctx, bodies, 48, env.API.PostEvent)
			s, err = ingestSample(ctx, res, 1, events)
			s.CPU = cpu()
			sinks.Await(ctx, events) // drain before the next run
			return s, err
		}
		var bodies [][]byte
		for first := 0; first < events; first += batch {
			bodies = append(bodies, batchBody(evs[first:min(first+batch, events)]))
		}
		res := postAll(ctx, bodies, 4, env.API.PostBatch)
		if res.failed > 0 {
			return s, fmt.Errorf("posting events: %s", res.note())
		}
		s = throughputSample(ctx, res, sinks.Await(ctx, events), events)
		s.CPU = cpu()
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run, %d consumers of one endpoint each", events, benchConsumers))
	return t, err
}

func consumerUID(i int) string { return fmt.Sprintf("bench-c%04d", i) }
