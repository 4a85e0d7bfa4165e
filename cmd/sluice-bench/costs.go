package main

import (
	"context"
	"encoding/json"
	"time"
)

// The cost scenarios: single-1's load (one endpoint, single posts from 16
// clients) with the endpoint using one feature at a time, each beside the
// same load on a plain endpoint (cost-plain, which runs first): what a
// feature costs a delivery once a tenant uses it. A feature left unused
// costs nothing, which the statement guards hold (TestPlainPostStatements,
// TestPlainDispatchStatements).

// costFeature is one feature as the cost scenarios use it.
type costFeature struct {
	name, title, what string
	features          sinkFeatures
	lines             int      // ordering keys spread over this many lines
	settings          []string // SLUICE_* settings it needs
	target            float64  // most CPU per delivery ÷ plain's
}

var costFeatures = []costFeature{
	{name: "filter", title: "a payload filter every event matches",
		what:     `its subscription has the filter {"amount": {"$gte": 100}}, which every payload matches`,
		features: sinkFeatures{filter: json.RawMessage(`{"amount": {"$gte": 100}}`)}, target: 1.2},
	{name: "fifo", title: "a FIFO endpoint, 100 lines",
		what:     `the endpoint is "ordering": "fifo" and event k carries ordering_key line-(k mod 100)`,
		features: sinkFeatures{endpoint: map[string]any{"ordering": "fifo"}}, lines: 100, target: 1.2},
	{name: "adaptive", title: "an adaptive rate limit that never binds",
		what:     `the endpoint has rate_limit {"per_second": 10000, "adaptive": true} (the most allowed)`,
		features: sinkFeatures{endpoint: map[string]any{"rate_limit": map[string]any{"per_second": 10000, "adaptive": true}}}, target: 1.2},
	{name: "encrypted", title: "payload encryption on",
		what:     "sluice runs with SLUICE_PAYLOAD_ENCRYPTION=on; the endpoint is plain",
		settings: []string{"SLUICE_PAYLOAD_ENCRYPTION=on"}, target: 1.15},
}

// costScenarios are cost-plain and one scenario per costFeature.
func costScenarios() []Scenario {
	out := []Scenario{{
		Name:       "cost-plain",
		Title:      "Cost per delivery: a plain endpoint (the baseline of the cost-* scenarios)",
		What:       costWhat("a plain endpoint"),
		MinTimeout: 2 * time.Minute,
		Run: func(ctx context.Context, env *Env) (Table, error) {
			t, err := e2eWith(ctx, env, costLoad(env, "costplain", costFeature{}))
			env.PlainCost = map[string]float64{}
			for _, r := range t.Rows {
				if !r.TimedOut {
					env.PlainCost[r.Metric.Name] = r.Median
				}
			}
			return t, err
		},
	}}
	for _, f := range costFeatures {
		out = append(out, Scenario{
			Name:       "cost-" + f.name,
			Title:      "Cost per delivery: " + f.title,
			What:       costWhat(f.what),
			MinTimeout: 2 * time.Minute,
			Settings:   f.settings,
			Run: func(ctx context.Context, env *Env) (Table, error) {
				t, err := e2eWith(ctx, env, costLoad(env, "cost"+f.name, f))
				t.Rows = append(t.Rows, costRatios(env, t, f.target)...)
				return t, err
			},
		})
	}
	return out
}

func costWhat(feature string) string {
	return "One loopback receiver behind one endpoint (max_in_flight 100): " + feature + "; 5,000 events posted " +
		"one per request to /v1/events by 16 concurrent clients; CPU per delivery = Sluice's and Postgres's CPU " +
		"from the first post to the last delivery ÷ deliveries; ÷ plain is the ratio of medians to cost-plain's, " +
		"run just before it in the same `make bench`."
}

func costLoad(env *Env, label string, f costFeature) e2eLoad {
	return e2eLoad{label: label, endpoints: 1, events: env.size(5000, 1000), perRequest: 1, clients: 16, cost: true,
		features: f.features, lines: f.lines}
}

// costRatios are t's cost against cost-plain's, when it ran.
func costRatios(env *Env, t Table, target float64) []Row {
	var rows []Row
	for _, m := range []struct {
		name   string
		target float64
	}{{"CPU per delivery", target}, {"statements per delivery", 0}, {"buffer pages per delivery", 0}} {
		base, ok := env.PlainCost[m.name]
		if !ok || base == 0 {
			continue
		}
		for _, r := range t.Rows {
			if r.Metric.Name != m.name || r.TimedOut {
				continue
			}
			v := r.Median / base
			rows = append(rows, Row{Metric: Metric{Name: m.name + " ÷ plain", Unit: "×", Target: m.target, AtMost: true},
				Values: []float64{v}, Median: v, Min: r.Min / base, Max: r.Max / base})
		}
	}
	if len(rows) == 0 {
		rows = append(rows, Row{Metric: Metric{Name: "÷ plain (run cost-plain first)"}})
	}
	return rows
}
