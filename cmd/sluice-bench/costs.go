package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The cost scenarios: single-1's load (one endpoint, single posts from 16
// clients) with the endpoint using one feature at a time, each beside the
// same load on a plain endpoint (cost-plain, which runs first): what a
// feature costs a delivery once a tenant uses it. A feature whose cost is
// per event, whatever the fan-out (encryption), is measured under
// e2e-100's load too (cost-plain-100, cost-encrypted-100). A feature left
// unused costs nothing, which the statement guards hold
// (TestPlainPostStatements, TestPlainDispatchStatements).

// costFeature is one feature as the cost scenarios use it.
type costFeature struct {
	name, title, what string
	features          sinkFeatures
	lines             int      // ordering keys spread over this many lines
	settings          []string // SLUICE_* settings it needs
	target            float64  // most CPU per delivery ÷ plain's
	hundred           bool     // under e2e-100's load too
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
		settings: []string{"SLUICE_PAYLOAD_ENCRYPTION=on"}, target: 1.15, hundred: true},
}

// A costShape is a load the cost scenarios run.
type costShape struct {
	suffix  string // of the scenarios' names
	load    string // its description; %s is the feature
	hundred bool   // e2e-100's load, not single-1's
}

var (
	singleShape  = costShape{load: "One loopback receiver behind one endpoint (max_in_flight 100): %s; 5,000 events posted one per request to /v1/events by 16 concurrent clients"}
	hundredShape = costShape{suffix: "-100", hundred: true,
		load: "100 loopback receivers, one endpoint each (max_in_flight 100): %s; 60,000 events posted through /v1/events/batch (1000 per request, 4 clients), event i matching exactly endpoint i mod 100 (e2e-100's load, three times as long, so that a run lasts long enough to read)"}
)

// costScenarios are cost-plain and one scenario per costFeature, then
// cost-plain-100 and one per costFeature measured under e2e-100's load.
func costScenarios() []Scenario {
	var out []Scenario
	for _, shape := range []costShape{singleShape, hundredShape} {
		out = append(out, Scenario{
			Name:       "cost-plain" + shape.suffix,
			Title:      "Cost per delivery: " + shape.plainTitle(),
			What:       shape.what("a plain endpoint"),
			MinTimeout: 2 * time.Minute,
			Run: func(ctx context.Context, env *Env) (Table, error) {
				t, err := e2eWith(ctx, env, shape.loadOf(env, "costplain", costFeature{}))
				base := map[string]float64{}
				for _, r := range t.Rows {
					if !r.TimedOut {
						base[r.Metric.Name] = r.Median
					}
				}
				env.PlainCost[shape.suffix] = base
				return t, err
			},
		})
		for _, f := range costFeatures {
			if shape.hundred && !f.hundred {
				continue
			}
			out = append(out, Scenario{
				Name:       "cost-" + f.name + shape.suffix,
				Title:      "Cost per delivery: " + f.title + shape.titleSuffix(),
				What:       shape.what(f.what),
				MinTimeout: 2 * time.Minute,
				Settings:   f.settings,
				Run: func(ctx context.Context, env *Env) (Table, error) {
					t, err := e2eWith(ctx, env, shape.loadOf(env, "cost"+f.name, f))
					t.Rows = append(t.Rows, costRatios(env.PlainCost[shape.suffix], t, f.target)...)
					return t, err
				},
			})
		}
	}
	return out
}

func (s costShape) plainTitle() string {
	if s.hundred {
		return "100 plain endpoints, batches (the baseline of the cost-*-100 scenarios)"
	}
	return "a plain endpoint (the baseline of the cost-* scenarios)"
}

func (s costShape) titleSuffix() string {
	if s.hundred {
		return ", 100 endpoints, batches"
	}
	return ""
}

func (s costShape) what(feature string) string {
	return fmt.Sprintf(s.load, feature) + "; CPU per delivery = Sluice's and Postgres's CPU from the first post to the " +
		"last delivery ÷ deliveries; ÷ plain is the ratio of medians to cost-plain" + s.suffix + "'s, run before it " +
		"in the same `make bench`."
}

func (s costShape) loadOf(env *Env, label string, f costFeature) e2eLoad {
	if s.hundred {
		return e2eLoad{label: label + "100", endpoints: 100, events: env.size(60000, 4000), perRequest: 1000, clients: 4,
			cost: true, features: f.features, lines: f.lines}
	}
	return e2eLoad{label: label, endpoints: 1, events: env.size(5000, 1000), perRequest: 1, clients: 16, cost: true,
		features: f.features, lines: f.lines}
}

// costRatios are t's cost against base, its cost-plain's, when it ran.
func costRatios(base map[string]float64, t Table, target float64) []Row {
	var rows []Row
	for _, m := range []struct {
		name   string
		target float64
	}{{"CPU per delivery", target}, {"statements per delivery", 0}, {"buffer pages per delivery", 0}} {
		plain, ok := base[m.name]
		if !ok || plain == 0 {
			continue
		}
		for _, r := range t.Rows {
			if r.Metric.Name != m.name || r.TimedOut {
				continue
			}
			v := r.Median / plain
			rows = append(rows, Row{Metric: Metric{Name: m.name + " ÷ plain", Unit: "×", Target: m.target, AtMost: true},
				Values: []float64{v}, Median: v, Min: r.Min / plain, Max: r.Max / plain})
		}
	}
	if len(rows) == 0 {
		rows = append(rows, Row{Metric: Metric{Name: "÷ plain (run its cost-plain first)"}})
	}
	return rows
}
