package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Side by side: -compare COMMIT builds that commit's cmd/sluice and this
// tree's, and runs each comparison scenario once per build per run,
// alternating the builds (base first in odd runs, head first in even
// ones), each on a fresh database of the same Postgres server; then prints
// every metric's median and range per build and the ratio head ÷ base.
// `make bench-compare BASE=<commit>` runs it on a private cluster with
// pg_stat_statements loaded, so the statements and their execution time
// per delivery are counted too.

var compareOneScenario = Scenario{
	Name:  "single-1",
	Title: "Single posts, 1 endpoint",
	What: "One loopback receiver behind one endpoint (max_in_flight 100); 5,000 events posted one per request to " +
		"/v1/events by 16 concurrent clients; deliveries/s = distinct deliveries ÷ (first post sent → last delivery " +
		"received); CPU per delivery = Sluice's and Postgres's CPU over that time ÷ deliveries.",
	MinTimeout: 2 * time.Minute, // a loaded machine takes ten times as long
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return e2eWith(ctx, env, single1Load(env))
	},
}

func single1Load(env *Env) e2eLoad {
	return e2eLoad{label: "single1", endpoints: 1, events: env.size(5000, 1000), perRequest: 1, clients: 16, cost: true}
}

func single100Load(env *Env) e2eLoad {
	return e2eLoad{label: "single100", endpoints: 100, events: env.size(20000, 4000), perRequest: 1, clients: 64, cost: true}
}

var compareHundredScenario = Scenario{
	Name:  "single-100",
	Title: "Single posts, 100 endpoints",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100); 20,000 events posted one per request to " +
		"/v1/events by 64 concurrent clients, event i matching exactly endpoint i mod 100 (e2e-single without the " +
		"floor); measured as single-1.",
	MinTimeout: 4 * time.Minute,
	Run: func(ctx context.Context, env *Env) (Table, error) {
		return e2eWith(ctx, env, single100Load(env))
	},
}

var compareTrickleScenario = Scenario{
	Name:  "trickle",
	Title: "25 events/s",
	What: "One loopback receiver behind one endpoint (max_in_flight 10); single posts to /v1/events, one every 40 ms: " +
		"2 s of them unmeasured, each delivered before the window opens, then 20 s; CPU from the first post to the " +
		"end of the window (the last delivery received, when later).",
	Run:            trickleRun,
	NoWaitSampling: true,
}

// compareScenarios are the scenarios -compare runs by default.
func compareScenarios() []Scenario {
	return []Scenario{compareOneScenario, compareHundredScenario, compareTrickleScenario}
}

func compareNames() []string {
	var names []string
	for _, s := range compareScenarios() {
		names = append(names, s.Name)
	}
	return names
}

// costMetrics are what a comparison judges a build by, beside throughput.
var costMetrics = []Metric{
	{Name: "CPU per delivery", Unit: "ms"}, // Sluice + Postgres
	{Name: "Sluice CPU per delivery", Unit: "ms"},
	{Name: "Postgres CPU per delivery", Unit: "ms"},
	{Name: "statements per delivery", Unit: ""},
	{Name: "Postgres execution per delivery", Unit: "ms"},
	{Name: "buffer pages per delivery", Unit: ""}, // shared buffers hit or read
	{Name: "WAL records per delivery", Unit: ""},
	{Name: "WAL bytes per delivery", Unit: "B"},
	{Name: "duplicates", Unit: ""},
}

// statementCount is what pg_stat_statements counted over a window: nil
// when Postgres does not have it.
// The top statements per delivery go to the log.
type statementCount func(ctx context.Context, deliveries float64) (statementTotals, bool)

// statementTotals is what the statements of a window cost Postgres, summed.
type statementTotals struct {
	ms    float64 // execution time
	calls int64
	work  statementWork
}

// statements resets pg_stat_statements, when on and Postgres has it, and
// returns how to read what it counted since.
func (e *Env) statements(ctx context.Context, on bool) statementCount {
	if !on {
		return nil
	}
	if ok, _ := pgssReady(ctx, e); !ok {
		return nil
	}
	if _, err := e.DB.Exec(ctx, `/* bench-drain */ SELECT pg_stat_statements_reset()`); err != nil {
		return nil
	}
	return func(ctx context.Context, per float64) (statementTotals, bool) {
		var t statementTotals
		ms, calls, top, err := statementTime(ctx, e.DB, per, "delivery")
		if err != nil {
			return t, false
		}
		logf("  statements: %s", top)
		t.ms, t.calls = ms, calls
		if t.work, err = readStatementWork(ctx, e.DB, per); err != nil {
			logf("  statement work: %v", err)
		}
		return t, true
	}
}

// costValues adds costMetrics to s, whose CPU is measured, for arr.
func costValues(ctx context.Context, s *Sample, arr Arrival, statements statementCount) {
	n := max(arr.Unique, 1)
	s.Values["CPU per delivery"] = perEvent(s.CPU.sluice+s.CPU.postgres, n)
	s.Values["Sluice CPU per delivery"] = perEvent(s.CPU.sluice, n)
	s.Values["Postgres CPU per delivery"] = perEvent(s.CPU.postgres, n)
	s.Values["duplicates"] = float64(arr.Duplicates)
	if statements == nil {
		return
	}
	if t, ok := statements(ctx, float64(n)); ok {
		s.Values["statements per delivery"] = float64(t.calls) / float64(n)
		s.Values["Postgres execution per delivery"] = t.ms / float64(n)
		s.Values["buffer pages per delivery"] = float64(t.work.blocks) / float64(n)
		s.Values["WAL records per delivery"] = float64(t.work.walRecords) / float64(n)
		s.Values["WAL bytes per delivery"] = float64(t.work.walBytes) / float64(n)
	}
}

// trickleRun posts 25 events/s for 20 s (5 s with -quick) to one endpoint.
func trickleRun(ctx context.Context, env *Env) (Table, error) {
	window := time.Duration(env.size(20, 5)) * time.Second
	metrics := append([]Metric{{Name: "Sluice + Postgres", Unit: "cores"}}, costMetrics...)
	receivers := newReceivers(1)
	defer receivers.Close()
	return env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		sinks, err := newSinks(ctx, env.API, receivers, 10, func(int) string {
			return fmt.Sprintf("bench.trickle.r%d", run)
		})
		if err != nil {
			return s, fmt.Errorf("set up the endpoint: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		if err := warmTrickle(ctx, env, sinks); err != nil {
			return s, err
		}
		view := sinks.from()
		statements := env.statements(ctx, true)
		stop := env.measureCPU()
		start := time.Now()
		posted, err := postAtRate(ctx, env.API.PostEvent, sinks.Types[0], idleRate, window)
		if err != nil {
			return s, err
		}
		arr := view.Await(ctx, posted)
		if rest := time.Until(start.Add(window)); rest > 0 {
			time.Sleep(rest)
		}
		s.CPU = stop()
		s.Values = map[string]float64{"Sluice + Postgres": s.CPU.cores(s.CPU.sluice + s.CPU.postgres)}
		costValues(ctx, &s, arr, statements)
		if arr.Unique < posted {
			s.TimedOut = true
			s.Note = fmt.Sprintf("%d of %d events delivered", arr.Unique, posted)
		}
		return s, nil
	})
}

// build is one side of a comparison.
type build struct {
	name string
	bin  string
}

// compare runs the comparison (see the top of this file).
func compare(ctx context.Context, o options) error {
	selected, err := selectCompare(o.scenarios)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sluice-compare-")
	if err != nil {
		return fmt.Errorf("make the comparison's temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	builds, err := compareBuilds(ctx, dir, o.compare)
	if err != nil {
		return err
	}
	// values[scenario][metric][build] are the runs' readings.
	values := map[string]map[string][][]float64{}
	metrics := map[string][]Metric{}
	var notes []string
	for run := 1; run <= o.runs && ctx.Err() == nil; run++ {
		for _, sc := range selected {
			order := slices.Clone(builds)
			if run%2 == 0 {
				slices.Reverse(order)
			}
			for _, b := range order {
				logf("run %d/%d, %s, %s", run, o.runs, sc.Name, b.name)
				t, err := compareOnce(ctx, o, sc, b)
				if ctx.Err() != nil {
					return fmt.Errorf("%s, %s, run %d: %w", sc.Name, b.name, run, ctx.Err())
				}
				if err != nil { // counted, and the comparison goes on
					logf("  %s, %s, run %d failed: %v", sc.Name, b.name, run, err)
					notes = append(notes, fmt.Sprintf("%s, %s, run %d FAILED: %v", sc.Name, b.name, run, err))
					t.Rows = append(t.Rows, Row{Metric: Metric{Name: "failed runs"}, Values: []float64{1}})
				} else {
					t.Rows = append(t.Rows, Row{Metric: Metric{Name: "failed runs"}, Values: []float64{0}})
				}
				if values[sc.Name] == nil {
					values[sc.Name] = map[string][][]float64{}
				}
				for _, r := range t.Rows {
					if values[sc.Name][r.Metric.Name] == nil {
						values[sc.Name][r.Metric.Name] = make([][]float64, len(builds))
						metrics[sc.Name] = append(metrics[sc.Name], r.Metric)
					}
					k := slices.IndexFunc(builds, func(x build) bool { return x.name == b.name })
					values[sc.Name][r.Metric.Name][k] = append(values[sc.Name][r.Metric.Name][k], r.Values...)
				}
				for _, n := range t.Notes {
					if strings.HasPrefix(n, "run ") || strings.Contains(n, "Disturbed") {
						notes = append(notes, fmt.Sprintf("%s, %s, run %d: %s", sc.Name, b.name, run, n))
					}
				}
			}
		}
	}
	fmt.Print(compareReport(builds, selected, metrics, values, o.runs, notes))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("comparison interrupted: %w", err)
	}
	return nil
}

// compareOnce runs sc once against a fresh database with b.
func compareOnce(ctx context.Context, o options, sc Scenario, b build) (Table, error) {
	srv, err := startServer(ctx, false, o.workers, b.bin)
	if err != nil {
		return Table{}, err
	}
	defer srv.stop()
	env := newEnv(ctx, o, srv)
	env.Runs, env.NoWaits = 1, sc.NoWaitSampling
	env.Timeout = max(o.timeout, sc.MinTimeout)
	t, err := sc.Run(ctx, env)
	if err == nil && t.Err != "" {
		err = errors.New(t.Err)
	}
	if srv.exited() {
		err = errors.Join(err, fmt.Errorf("sluice exited during the run\n%s", srv.logTail(40)))
	}
	return t, err
}

// compareBuilds builds base (a commit) from `git archive` into dir, and
// this tree, and returns them in that order.
func compareBuilds(ctx context.Context, dir, base string) ([]build, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", base+"^{commit}").Output()
	if err != nil {
		return nil, fmt.Errorf("git rev-parse %s: %w", base, err)
	}
	short := strings.TrimSpace(string(out))
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return nil, fmt.Errorf("make the base's source dir: %w", err)
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", short, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git archive %s: %w\n%s", short, err, out)
	}
	builds := []build{{name: "base " + short, bin: filepath.Join(dir, "sluice-base")}, {name: "head", bin: filepath.Join(dir, "sluice-head")}}
	if err := buildSluice(ctx, src, builds[0].bin); err != nil {
		return nil, err
	}
	if err := buildSluice(ctx, ".", builds[1].bin); err != nil {
		return nil, err
	}
	return builds, nil
}

// selectCompare picks the comparison scenarios named in list (all three
// when empty); any other scenario may be named too.
func selectCompare(list string) ([]Scenario, error) {
	if strings.TrimSpace(list) == "" {
		return compareScenarios(), nil
	}
	all := append(compareScenarios(), scenarios()...)
	var out []Scenario
	for _, n := range strings.Split(list, ",") {
		k := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == strings.TrimSpace(n) })
		if k < 0 {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
		out = append(out, all[k])
	}
	return out, nil
}

// compareReport is the comparison's table, in Markdown.
func compareReport(builds []build, selected []Scenario, metrics map[string][]Metric, values map[string]map[string][][]float64, runs int, notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s against %s: medians (ranges) of %d runs each, alternating, a fresh database each run\n\n",
		builds[1].name, builds[0].name, runs)
	fmt.Fprintf(&b, "| scenario | metric | %s | %s | ratio |\n|---|---|---|---|---|\n", builds[0].name, builds[1].name)
	for _, sc := range selected {
		for _, m := range metrics[sc.Name] {
			vs := values[sc.Name][m.Name]
			cell := func(v []float64) string {
				if len(v) == 0 {
					return "—"
				}
				return fmt.Sprintf("%s (%s–%s)", m.format(median(v)), m.format(slices.Min(v)), m.format(slices.Max(v)))
			}
			ratio := "—"
			if len(vs[0]) > 0 && len(vs[1]) > 0 && median(vs[0]) != 0 {
				ratio = fmt.Sprintf("%.2f×", median(vs[1])/median(vs[0]))
			}
			if m.Name == "failed runs" { // a count, not a reading
				cell = func(v []float64) string {
					failed := 0
					for _, x := range v {
						failed += int(x)
					}
					return fmt.Sprintf("%d of %d", failed, len(v))
				}
				ratio = "—"
			}
			name := m.Name
			if m.Unit != "" {
				name += " (" + m.Unit + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", sc.Name, name, cell(vs[0]), cell(vs[1]), ratio)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	b.WriteString("\n")
	return b.String()
}
