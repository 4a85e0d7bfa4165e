package main

import (
	"context"
	"time"
)

// Latency of single posts: the way most customers send, at a steady rate.

var latencySingleScenario = Scenario{
	Name:  "latency-single",
	Title: "Delivery latency of single posts at 2,000 events/s",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100). Events are posted one per request to " +
		"/v1/events at a steady 2,000 events/s for 10 s (every 10 ms the events due by then are started, each on a " +
		"request of its own, at most 256 requests outstanding; an event that finds none free is dropped, not sent " +
		"late), spread over the 100 endpoints. Each payload carries sent_ns, the time its POST started; latency = " +
		"receipt time at the receiver − sent_ns, over the first delivery of every event. Targets from the scale " +
		"issue: p50 ≤ 50 ms, p99 ≤ 250 ms.",
	Run: latencySingle,
}

// singleRate is the offered rate of latency-single (the scale issue's).
const singleRate = 2000.0

func latencySingle(ctx context.Context, env *Env) (Table, error) {
	duration := time.Duration(env.size(10, 3)) * time.Second
	return latencyRuns(ctx, env, "latsingle", singleRate, "the scale issue's", duration, offerSingles)
}
