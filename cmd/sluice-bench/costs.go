package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The cost scenarios: single-1's load (one endpoint, single posts from 16
// clients) with the endpoint using one feature at a time, against the same
// load on a plain endpoint: what a feature costs a delivery once a tenant
// uses it. Each run measures both, in turn (plain first in odd runs, the
// feature first in even ones), so that what drifts over a benchmark (a
// fresh database's first writes, a warming cache, the machine) weighs on
// both alike; when the feature is a setting, sluice is restarted before
// each. A feature whose cost is per event, whatever the fan-out
// (encryption), is measured under e2e-100's load too (cost-encrypted-100).
// A feature left unused costs nothing, which the statement guards hold
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

// costScenarios are one scenario per costFeature, then one per costFeature
// measured under e2e-100's load.
func costScenarios() []Scenario {
	var out []Scenario
	for _, shape := range []costShape{singleShape, hundredShape} {
		for _, f := range costFeatures {
			if shape.hundred && !f.hundred {
				continue
			}
			out = append(out, Scenario{
				Name:       "cost-" + f.name + shape.suffix,
				Title:      "Cost per delivery: " + f.title + shape.titleSuffix(),
				What:       shape.what(f.what),
				MinTimeout: 2 * time.Minute,
				Run: func(ctx context.Context, env *Env) (Table, error) {
					return costPairs(ctx, env, shape, f)
				},
			})
		}
	}
	return out
}

// costPairs measures f's load and the same load on plain endpoints, one
// of each per run, each on a sluice of its own when f is a setting.
func costPairs(ctx context.Context, env *Env, shape costShape, f costFeature) (Table, error) {
	plain, used := shape.loadOf(env, "plain"+f.name, costFeature{}), shape.loadOf(env, "cost"+f.name, f)
	receivers := newReceivers(used.endpoints)
	defer receivers.Close()
	metrics := append(e2eMetrics(used), pairMetrics(f.target)...)
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (Sample, error) {
		sides := [2]struct {
			load     e2eLoad
			settings []string
		}{{plain, nil}, {used, f.settings}}
		var got [2]Sample // plain's, the feature's
		for k := range sides {
			i := k
			if run%2 == 0 { // the feature first
				i = len(sides) - 1 - k
			}
			if k > 0 {
				if note := env.quiesce(ctx, time.Minute); note != "" {
					return Sample{}, fmt.Errorf("between plain and %s: %s", f.name, note)
				}
				_ = env.waitIdle(ctx, env.idleWait()) // as Repeat waits before a run
			}
			// A feature that is a setting runs on a fresh sluice, and so
			// does the plain load beside it: a process's first seconds
			// (its connections' first statements above all) cost more.
			if len(f.settings) > 0 {
				if err := env.Relaunch(ctx, sides[i].settings); err != nil {
					return Sample{}, err
				}
			}
			s, err := e2eOnce(ctx, env, sides[i].load, receivers, run)
			if err != nil {
				return s, err
			}
			got[i] = s
		}
		return pairSample(got[0], got[1]), nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d events per run over %d endpoint(s), max_in_flight %d, %d per request from %d clients; each run measured the plain endpoints and then the feature, or the other way round, in turn",
		used.events, used.endpoints, e2eMaxInFlight, used.perRequest, used.clients))
	return t, err
}

// paired are the metrics a cost scenario reads of its plain runs too, and
// whose ratio it reports.
var paired = []string{"CPU per delivery", "Sluice CPU per delivery", "Postgres CPU per delivery",
	"statements per delivery", "buffer pages per delivery"}

// pairMetrics are the plain runs' readings and the ratios, the first's
// target at most target.
func pairMetrics(target float64) []Metric {
	var out []Metric
	for _, name := range paired {
		out = append(out, Metric{Name: "plain: " + name, Unit: unitOf(name)})
	}
	for i, name := range paired {
		m := Metric{Name: name + " ÷ plain", Unit: "×"}
		if i == 0 {
			m.Target, m.AtMost = target, true
		}
		out = append(out, m)
	}
	return out
}

func unitOf(name string) string {
	for _, m := range costMetrics {
		if m.Name == name {
			return m.Unit
		}
	}
	return ""
}

// pairSample is used's readings, with plain's and the ratio of each
// paired metric read in both.
func pairSample(plain, used Sample) Sample {
	for _, name := range paired {
		p, ok := plain.Values[name]
		if !ok {
			continue
		}
		used.Values["plain: "+name] = p
		if u, ok := used.Values[name]; ok && p > 0 {
			used.Values[name+" ÷ plain"] = u / p
		}
	}
	used.TimedOut = used.TimedOut || plain.TimedOut
	used.Note = joinNotes(used.Note, prefixed("plain: ", plain.Note))
	return used
}

func prefixed(prefix, note string) string {
	if note == "" {
		return ""
	}
	return prefix + note
}

func (s costShape) titleSuffix() string {
	if s.hundred {
		return ", 100 endpoints, batches"
	}
	return ""
}

func (s costShape) what(feature string) string {
	return fmt.Sprintf(s.load, feature) + "; CPU per delivery = Sluice's and Postgres's CPU from the first post to the " +
		"last delivery ÷ deliveries; ÷ plain is, per run, the ratio to the same load on plain endpoints measured in the same " +
		"run (before it in odd runs, after it in even ones), with sluice restarted before each of the two when the feature is a setting; " +
		"the plain readings are the `plain:` rows."
}

func (s costShape) loadOf(env *Env, label string, f costFeature) e2eLoad {
	if s.hundred {
		return e2eLoad{label: label + "100", endpoints: 100, events: env.size(60000, 4000), perRequest: 1000, clients: 4,
			cost: true, features: f.features, lines: f.lines}
	}
	return e2eLoad{label: label, endpoints: 1, events: env.size(5000, 1000), perRequest: 1, clients: 16, cost: true,
		features: f.features, lines: f.lines}
}
