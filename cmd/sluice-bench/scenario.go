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

	// MinTimeout is the least time one run gets, whatever -timeout says
	// (0: -timeout), for scenarios whose setup alone takes minutes.
	MinTimeout time.Duration
	// NoWaitSampling turns off the pg_stat_activity sampling during runs:
	// its queries would be a noticeable part of what an idle run measures.
	NoWaitSampling bool
	// Workers is the number of `serve --worker` processes the scenario
	// runs with, whatever -workers says (0: -workers). When it differs
	// from what runs, sluice is restarted for it, against the same
	// database, and back to -workers for the scenarios after it.
	Workers int
	// Settings are SLUICE_* settings (NAME=value) the scenario runs with,
	// besides the benchmark's own; sluice is restarted with them, and
	// without them for the scenarios after it.
	Settings []string
}

// scenarios lists every scenario, in the order they run.
func scenarios() []Scenario {
	return append([]Scenario{
		ingestBatchScenario,
		ingestSingleScenario,
		e2eOneScenario,
		e2eHundredScenario,
		e2eSingleScenario,
		latencyScenario,
		latencySingleScenario,
		isolationScenario,
		typesIngestScenario,
		consumersIngestScenario,
		typesE2EScenario,
		consumersE2EScenario,
		idleScenario,
		blockedScenario,
		drainScenario,
		rateLimitScenario,
		adaptiveScenario,
		adaptive2WScenario,
		retentionScenario,
		tenantRetentionScenario,
		backlogScenario,
		backlogAlertsScenario,
		filtersScenario,
		optionsScenario,
		pollIdleScenario,
		listenScenario,
		schemaNeighbourScenario,
		searchScenario,
		largeScenario,
		brokersScenario,
	}, append(costScenarios(), ablationScenarios()...)...)
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// selectScenarios picks the scenarios named in list (all when empty), in
// their usual order; a comparison scenario (compare.go) runs only when
// named, after the others.
func selectScenarios(list string) ([]Scenario, error) {
	all := scenarios()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	all = append(all, compareScenarios()...)
	names := append(scenarioNames(), compareNames()...)
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(names, ", "))
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
	// Sluice runs the sluice command (tenant create, say) against the
	// benchmark's database.
	Sluice   func(ctx context.Context, args ...string) ([]byte, error)
	DB       *pgx.Conn
	WaitDB   *pgx.Conn     // for sampling pg_stat_activity, used only during runs
	Procs    Procs         // for CPU accounting
	NoWaits  bool          // do not sample pg_stat_activity during runs (Scenario.NoWaitSampling)
	IdleWait time.Duration // the longest a run waits for the machine to go idle (-idle-wait)

	// SearchDeliveries and SearchRequests are -search-deliveries and
	// -search-requests; 0 means the search scenario's defaults.
	SearchDeliveries, SearchRequests int

	// DebugURL is sluice's pprof (SLUICE_DEBUG_ADDR), for a scenario that
	// profiles it (ablation).
	DebugURL string

	// SluiceBin is the sluice binary, for a scenario that runs a command
	// of its own beside the server (listen).
	SluiceBin string

	// E2EHundredRate is the median deliveries/s of e2e-100, once measured.
	E2EHundredRate float64
	// Relaunch restarts sluice with settings (SLUICE_* NAME=value) beside
	// the benchmark's.
	Relaunch func(ctx context.Context, settings []string) error

	// Blocked are endpoints a scenario left throttled or disabled with a
	// backlog on purpose; quiesce ignores their queued deliveries and jobs.
	Blocked []string
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
	// Worst judges the target on the worst run (the highest value for a
	// ceiling, the lowest for a floor) instead of the median: for
	// invariants that must hold in every run.
	Worst bool
}

func (m Metric) format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v < 0.1 && v > -0.1 && v != 0: // idle costs in cores, database time per delivery
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func (m Metric) target() string {
	every := ""
	if m.Worst {
		every = " in every run"
	}
	switch {
	case m.Target == 0:
		return "—"
	case m.AtMost:
		return "≤ " + m.format(m.Target) + " " + m.Unit + every
	default:
		return "≥ " + m.format(m.Target) + " " + m.Unit + every
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
	case r.Metric.meets(r.judged()):
		return "pass"
	default:
		return "FAIL"
	}
}

// judged is the value the target is judged on: the median, or the worst
// run (Metric.Worst).
func (r Row) judged() float64 {
	switch {
	case !r.Metric.Worst:
		return r.Median
	case r.Metric.AtMost:
		return r.Max
	default:
		return r.Min
	}
}

// Table is a scenario's result.
type Table struct {
	Rows      []Row
	Notes     []string
	Disturbed bool // other processes used noticeable CPU during the runs
	Err       string
	Elapsed   time.Duration
}
