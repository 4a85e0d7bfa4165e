package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

var latencyScenario = Scenario{
	Name:  "latency",
	Title: "Delivery latency at half load",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100). Every 10 ms a small batch is posted to " +
		"/v1/events/batch so that the offered load is a fixed rate (default half the e2e-100 median), spread over " +
		"the 100 endpoints, for 10 s. Each payload carries sent_ns, the time its request was sent; latency = receipt " +
		"time at the receiver − sent_ns, over the first delivery of every event.",
	Run: latency,
}

func latency(ctx context.Context, env *Env) (Table, error) {
	duration := time.Duration(env.size(10, 3)) * time.Second
	rate, rateNote := env.LatencyRate, "set by -latency-rate"
	switch {
	case rate > 0:
	case env.E2EHundredRate > 0:
		rate, rateNote = env.E2EHundredRate/2, "half the e2e-100 median"
	default:
		rate, rateNote = 1000, "default: e2e-100 was not measured in this invocation"
	}
	return latencyRuns(ctx, env, "latency", rate, rateNote, duration, offerLoad)
}

// latencyRuns offers rate events/s with offer for duration, spread over
// 100 endpoints (max_in_flight 100), and measures receipt − sent_ns of the
// first delivery of every event, in each run.
func latencyRuns(ctx context.Context, env *Env, name string, rate float64, rateNote string, duration time.Duration, offer offerFunc) (Table, error) {
	const endpoints, maxInFlight = 100, 100
	metrics := []Metric{
		{Name: "p50", Unit: "ms", Target: 50, AtMost: true},
		{Name: "p95", Unit: "ms"},
		{Name: "p99", Unit: "ms", Target: 250, AtMost: true},
		{Name: "max", Unit: "ms"},
		{Name: "delivered", Unit: "deliveries/s"},
	}
	receivers := newReceivers(endpoints)
	defer receivers.Close()
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		sinks, err := newSinks(ctx, env.API, receivers, maxInFlight, func(i int) string {
			return fmt.Sprintf("bench.%s.r%d.%d", name, run, i)
		})
		if err != nil {
			return s, fmt.Errorf("set up endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()

		cpu := env.measureCPU()
		start := time.Now()
		accepted, skipped, err := offer(ctx, env.API, sinks.Types, rate, duration)
		if err != nil {
			return s, err
		}
		arr := sinks.Await(ctx, accepted)
		cpuUsed := cpu()
		s = latencySample(arr, accepted, start)
		s.CPU = cpuUsed
		if skipped > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("the load generator skipped %d sends: too many requests outstanding", skipped))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("offered load %.0f events/s (%s) for %s per run, over %d endpoints",
		rate, rateNote, duration, endpoints))
	return t, err
}

// latencySample computes receipt − sent_ns percentiles over the first
// delivery of each event, and the delivery rate from start (the first
// post) to the last receipt.
func latencySample(arr Arrival, want int, start time.Time) Sample {
	lat := make([]time.Duration, 0, len(arr.First))
	bad := 0
	for _, r := range arr.First {
		var body struct {
			Data struct {
				SentNS int64 `json:"sent_ns"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.Data.SentNS == 0 {
			bad++
			continue
		}
		lat = append(lat, r.At.Sub(time.Unix(0, body.Data.SentNS)))
	}
	s := Sample{Values: map[string]float64{"delivered": 0}}
	if arr.Unique > 0 {
		s.Values["delivered"] = float64(arr.Unique) / arr.Last.Sub(start).Seconds()
	}
	if len(lat) > 0 {
		s.Values["p50"] = ms(percentile(lat, 50))
		s.Values["p95"] = ms(percentile(lat, 95))
		s.Values["p99"] = ms(percentile(lat, 99))
		s.Values["max"] = ms(percentile(lat, 100))
	}
	if arr.Unique < want {
		s.TimedOut = true
		s.Note = fmt.Sprintf("timed out: %d of %d deliveries received (percentiles over those only)", arr.Unique, want)
	}
	if bad > 0 {
		s.Note = joinNotes(s.Note, fmt.Sprintf("%d deliveries without a readable data.sent_ns", bad))
	}
	if arr.Duplicates > 0 {
		s.Note = joinNotes(s.Note, fmt.Sprintf("%d duplicate deliveries", arr.Duplicates))
	}
	return s
}
