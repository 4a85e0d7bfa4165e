package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Scenario is one named benchmark. Run sets up what it needs, measures
// through Env.Repeat and returns one table of rows. Adding a scenario means
// writing its Run in its own file and listing it in scenarios.
type Scenario struct {
	Name  string // the -scenarios key
	Title string
	What  string // how it is measured, for RESULTS.md
	Run   func(ctx context.Context, env *Env) (Table, error)
}

// scenarios lists every scenario, in the order they run.
func scenarios() []Scenario {
	return []Scenario{
		ingestBatchScenario,
		ingestSingleScenario,
		e2eOneScenario,
		e2eHundredScenario,
		latencyScenario,
	}
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// selectScenarios picks the scenarios named in list (all when empty), in
// their usual order.
func selectScenarios(list string) ([]Scenario, error) {
	all := scenarios()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(scenarioNames(), n) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(scenarioNames(), ", "))
		}
		want[n] = true
	}
	var out []Scenario
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Env is what scenarios share: settings, the API client, the database, and
// results that later scenarios build on.
type Env struct {
	Runs        int
	Quick       bool
	Timeout     time.Duration // hard limit of one run
	LatencyRate float64       // -latency-rate; 0 means derive it
	API         *Client
	DB          *pgx.Conn
	SluicePID   int

	// E2EHundredRate is the median deliveries/s of e2e-100, once measured.
	E2EHundredRate float64
}

// size picks the full or the -quick count.
func (e *Env) size(full, quick int) int {
	if e.Quick {
		return quick
	}
	return full
}

// Metric is one reported quantity and its target, if any.
type Metric struct {
	Name   string
	Unit   string
	Target float64 // 0: no target
	AtMost bool    // the target is a ceiling (latency), not a floor (rate)
}

func (m Metric) format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func (m Metric) target() string {
	switch {
	case m.Target == 0:
		return "—"
	case m.AtMost:
		return "≤ " + m.format(m.Target) + " " + m.Unit
	default:
		return "≥ " + m.format(m.Target) + " " + m.Unit
	}
}

func (m Metric) meets(v float64) bool {
	if m.AtMost {
		return v <= m.Target
	}
	return v >= m.Target
}

// Sample is what one run measured: a value per metric name.
type Sample struct {
	Values   map[string]float64
	TimedOut bool
	Note     string // e.g. what a timed-out run reached
	CPU      cpuUse // over the measured window; when zero, over the whole run
}

// Row is one metric over all runs.
type Row struct {
	Metric           Metric
	Values           []float64 // per run
	Median, Min, Max float64
	TimedOut         bool // some run hit the time limit
}

// verdict is "pass", "FAIL" or "—" (no target).
func (r Row) verdict() string {
	switch {
	case r.Metric.Target == 0:
		return "—"
	case r.TimedOut:
		return "FAIL (timeout)"
	case r.Metric.meets(r.Median):
		return "pass"
	default:
		return "FAIL"
	}
}

// Table is a scenario's result.
type Table struct {
	Rows    []Row
	Notes   []string
	Err     string
	Elapsed time.Duration
}

// Repeat runs once env.Runs times, each after the previous run's work has
// drained and within env.Timeout, and aggregates the metrics. It stops at
// the first error.
func (e *Env) Repeat(ctx context.Context, metrics []Metric, once func(ctx context.Context, run int) (Sample, error)) (Table, error) {
	var (
		t       Table
		samples []Sample
		cpu     cpuUse
	)
	for run := 1; run <= e.Runs; run++ {
		waitStart := time.Now()
		if note := e.quiesce(ctx, 60*time.Second); note != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: %s", run, note))
		} else if waited := time.Since(waitStart); waited > time.Second {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: waited %s for the work of the previous run to drain (queued deliveries, fan-out and dispatch jobs)",
				run, waited.Round(100*time.Millisecond)))
		}
		if err := ctx.Err(); err != nil {
			return t.aggregate(metrics, samples, cpu), err
		}
		whole := e.measureCPU()
		runCtx, cancel := context.WithTimeout(ctx, e.Timeout)
		s, err := once(runCtx, run)
		cancel()
		if s.CPU.wall == 0 {
			s.CPU = whole()
		}
		cpu = cpu.add(s.CPU)
		if err != nil {
			return t.aggregate(metrics, samples, cpu), fmt.Errorf("run %d: %w", run, err)
		}
		if s.Note != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: %s", run, s.Note))
		}
		samples = append(samples, s)
		logf("  run %d/%d: %s", run, e.Runs, s.summary(metrics))
	}
	return t.aggregate(metrics, samples, cpu), nil
}

func (t Table) aggregate(metrics []Metric, samples []Sample, cpu cpuUse) Table {
	for _, m := range metrics {
		r := Row{Metric: m}
		for _, s := range samples {
			if v, ok := s.Values[m.Name]; ok {
				r.Values = append(r.Values, v)
			}
			r.TimedOut = r.TimedOut || s.TimedOut
		}
		if len(r.Values) == 0 {
			continue
		}
		r.Median, r.Min, r.Max = median(r.Values), slices.Min(r.Values), slices.Max(r.Values)
		t.Rows = append(t.Rows, r)
	}
	if cpu.wall > 0 {
		t.Notes = append(t.Notes, "CPU during the runs: "+cpu.String())
	}
	return t
}

func (s Sample) summary(metrics []Metric) string {
	var parts []string
	for _, m := range metrics {
		if v, ok := s.Values[m.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s %s %s", m.Name, m.format(v), m.Unit))
		}
	}
	if s.TimedOut {
		parts = append(parts, "TIMED OUT")
	}
	if s.Note != "" {
		parts = append(parts, "("+s.Note+")")
	}
	return strings.Join(parts, ", ")
}

// measureCPU starts measuring CPU use; call the result to stop.
func (e *Env) measureCPU() func() cpuUse {
	before := readCPU(e.SluicePID)
	return func() cpuUse { return readCPU(e.SluicePID).since(before) }
}

// quiesce waits until Sluice has no queued deliveries and no fan-out or
// dispatch job left, so that runs do not overlap. It returns a note when
// that did not happen within limit.
func (e *Env) quiesce(ctx context.Context, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		var queued, jobs int64
		err := e.DB.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM deliveries WHERE status IN ('pending', 'failed')),
			       (SELECT count(*) FROM river_job WHERE queue IN ('fanout', 'dispatch')
			          AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending'))`).Scan(&queued, &jobs)
		if err != nil {
			return "quiescence check failed: " + err.Error()
		}
		if queued == 0 && jobs == 0 {
			return ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("not quiet after %s: %d deliveries queued, %d fan-out/dispatch jobs left", limit, queued, jobs)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
