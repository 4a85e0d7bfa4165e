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
		return consumersRun(ctx, env, "ingest", env.size(10000, 1000), true)
	},
}

var typesIngestScenario = Scenario{
	Name:  "types-ingest",
	Title: "Ingest, single events to 1,000 endpoints by type (baseline of consumers-ingest)",
	What: "As consumers-ingest, but without consumers: endpoint i is subscribed to type i and event i has type " +
		"i mod 1000, so each event reaches exactly one endpoint by its type alone.",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return consumersRun(ctx, env, "ingest", env.size(10000, 1000), false)
	},
}

var consumersE2EScenario = Scenario{
	Name:  "consumers-e2e",
	Title: "End to end, 1,000 consumers",
	What: "1,000 consumers with one endpoint each (max_in_flight 100) on 100 loopback receivers; events posted through " +
		"/v1/events/batch (1000 per request, 4 clients), event i addressed to consumer i mod 1000; deliveries/s = " +
		"distinct deliveries ÷ (first post sent → last delivery received). Compare e2e-100.",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return consumersRun(ctx, env, "e2e", env.size(20000, 4000), true)
	},
}

var typesE2EScenario = Scenario{
	Name:  "types-e2e",
	Title: "End to end, 1,000 endpoints by type (baseline of consumers-e2e)",
	What: "As consumers-e2e, but without consumers: endpoint i is subscribed to type i and event i has type " +
		"i mod 1000.",
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return consumersRun(ctx, env, "e2e", env.size(20000, 4000), false)
	},
}

// consumersRun posts events to 1,000 endpoints, singly (mode "ingest",
// measuring acceptance) or in batches ("e2e", measuring delivery): each
// event addressed to a consumer (addressed) or of a type only one endpoint
// is subscribed to (not addressed, the baseline).
func consumersRun(ctx context.Context, env *Env, mode string, events int, addressed bool) (Table, error) {
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
		typ := fmt.Sprintf("bench.consumers.%s.%t.r%d", mode, addressed, run)
		typeOf, consumerOf := func(int) string { return typ }, consumerUID
		if !addressed {
			typeOf = func(i int) string { return fmt.Sprintf("%s.%d", typ, i) }
			consumerOf = func(int) string { return "" }
		}
		sinks, err := newConsumerSinks(ctx, env.API, receivers, benchConsumers, maxInFlight, typeOf, consumerOf)
		if err != nil {
			return s, fmt.Errorf("set up endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		evs := make([]EventIn, events)
		for k := range evs {
			evs[k] = EventIn{Type: typ, Payload: payload(0, k), Consumer: consumerUID(k % benchConsumers)}
			if !addressed {
				evs[k] = EventIn{Type: typeOf(k % benchConsumers), Payload: payload(0, k)}
			}
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
	note := fmt.Sprintf("%d events per run, %d consumers of one endpoint each", events, benchConsumers)
	if !addressed {
		note = fmt.Sprintf("%d events per run, %d endpoints with a type each, no consumers", events, benchConsumers)
	}
	t.Notes = append(t.Notes, note)
	return t, err
}

func consumerUID(i int) string { return fmt.Sprintf("bench-c%04d", i) }
