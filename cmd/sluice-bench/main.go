// Command sluice-bench is Sluice's load benchmark. `make bench` runs it
// against a throwaway Postgres server (DATABASE_URL): it builds ./cmd/sluice,
// creates a fresh database sluice_bench, migrates it, creates a tenant,
// starts `sluice serve` as a subprocess on a free loopback port, drives it
// with in-process loopback receivers (internal/testkit/receiver), and writes
// bench/RESULTS.md.
//
// Each scenario (scenario.go lists them; one file per group) runs -runs
// times and reports the median and range of every metric. Every loop is
// bounded in count and time: a run that passes -timeout records what it
// reached and is marked as timed out.
//
// Flags:
//
//	-runs N          runs per scenario (default 3; 1 with -quick)
//	-quick           small counts, for a smoke run
//	-out FILE        results file (default bench/RESULTS.md)
//	-scenarios LIST  comma-separated scenario names (default all)
//	-timeout D       hard limit of one run (default 60s; a scenario whose
//	                 setup takes minutes asks for more: Scenario.MinTimeout)
//	-latency-rate R  offered events/s of the latency scenario
//	                 (default half the e2e-100 median, or 1000)
//	-keep            keep the sluice binary after the run, so that a
//	                 `perf record -p <pid>` of it can be symbolised
//	-profile DIR     write a CPU profile of sluice (through its pprof
//	                 endpoint, SLUICE_DEBUG_ADDR) per scenario to
//	                 DIR/<scenario>.pprof, covering its first -profile-for
//	                 (default 10s)
//	-workers N       run sluice as `serve --api --dashboard` beside N
//	                 `serve --worker` processes (default 0: one process
//	                 serving every role); a scenario that needs a number
//	                 of its own (Scenario.Workers, e.g. ratelimit-2w)
//	                 restarts sluice with it
//	-sluice BIN      run this sluice binary instead of building ./cmd/sluice
//	-set NAME=value  a SLUICE_* setting every scenario's sluice runs with,
//	                 before the scenario's own (repeatable), e.g.
//	                 -set SLUICE_PAYLOAD_ENCRYPTION=on
//	-idle-wait D     the longest a run waits for the machine to go idle
//	                 (default 1m; the run starts anyway, and says so)
//	-search-deliveries N  deliveries the search scenario seeds, a third of
//	                 them the benchmark tenant's (default 30,000,000;
//	                 300,000 with -quick)
//	-search-requests N  requests of each search per run (default 40; 20
//	                 with -quick)
//	-compare COMMIT  build COMMIT's cmd/sluice beside this tree's and run
//	                 the comparison scenarios (compare.go) with each,
//	                 alternating, one fresh database per run; prints
//	                 medians, ranges and ratios instead of writing -out
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	runs        int
	quick       bool
	out         string
	scenarios   string
	timeout     time.Duration
	latencyRate float64
	keep        bool
	profile     string
	profileFor  time.Duration
	workers     int
	sluice      string
	compare     string
	idleWait    time.Duration
	settings    []string // -set
	update      bool

	searchDeliveries, searchRequests int
}

func main() {
	if os.Getenv(floorAddrEnv) != "" { // a floor process of the idle scenario
		if err := floorMain(); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.runs, "runs", 3, "runs per scenario (1 with -quick unless set)")
	flag.BoolVar(&o.quick, "quick", false, "small counts, for a smoke run")
	flag.StringVar(&o.out, "out", "bench/RESULTS.md", "results file")
	flag.BoolVar(&o.update, "update", false, "rewrite only the scenarios run in -out, keeping the others' results as it has them (update.go)")
	flag.StringVar(&o.scenarios, "scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(scenarioNames(), ",")+")")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "hard time limit of one run")
	flag.Float64Var(&o.latencyRate, "latency-rate", 0, "offered events/s of the latency scenario (0: half the e2e-100 median, or 1000)")
	flag.IntVar(&o.workers, "workers", 0, "serve --api --dashboard beside this many serve --worker processes (0: one process for every role)")
	flag.BoolVar(&o.keep, "keep", false, "keep the sluice binary in its temp dir after the run (for perf symbols)")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of sluice per scenario to DIR/<scenario>.pprof")
	flag.DurationVar(&o.profileFor, "profile-for", 10*time.Second, "length of each -profile profile, from the scenario's start")
	flag.Func("set", "a SLUICE_* setting (NAME=value) every scenario's sluice runs with (repeatable)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || !strings.HasPrefix(name, "SLUICE_") {
			return fmt.Errorf("%q is not SLUICE_NAME=value", v)
		}
		o.settings = append(o.settings, v)
		return nil
	})
	flag.DurationVar(&o.idleWait, "idle-wait", time.Minute, "the longest a run waits for the machine to go idle before it starts")
	flag.IntVar(&o.searchDeliveries, "search-deliveries", 0, "deliveries the search scenario seeds, a third the benchmark tenant's (0: 30,000,000; 300,000 with -quick)")
	flag.IntVar(&o.searchRequests, "search-requests", 0, "requests of each search per run in the search scenario (0: 40; 20 with -quick)")
	flag.StringVar(&o.sluice, "sluice", "", "run this sluice binary instead of building ./cmd/sluice")
	flag.StringVar(&o.compare, "compare", "", "compare this commit's build with this tree's (compare.go); -scenarios picks among "+
		strings.Join(compareNames(), ",")+" (default all three)")
	flag.Parse()
	runsSet := false
	flag.Visit(func(f *flag.Flag) { runsSet = runsSet || f.Name == "runs" })
	if o.quick && !runsSet {
		o.runs = 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runner := run
	if o.compare != "" {
		runner = compare
	}
	if err := runner(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	selected, err := selectScenarios(o.scenarios)
	if err != nil {
		return err
	}
	if o.runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	started := time.Now()
	var keep kept
	if o.update {
		if keep, err = readKept(o.out); err != nil {
			return err
		}
	}
	commit := "(binary given with -sluice)"
	if o.sluice == "" {
		commit = treeCommit(ctx, o.out)
	}

	srv, err := startServer(ctx, o.keep, o.workers, o.sluice)
	if err != nil {
		return err
	}
	defer srv.stop()

	env := newEnv(ctx, o, srv)
	report := Report{
		Started: started,
		Options: o,
		Machine: describeMachine(ctx, srv.db),
		LogPath: srv.logPath,
		Commit:  commit,
		Kept:    keep,
	}
	logf("sluice %s (pprof %s/debug/pprof/), log %s", srv.baseURL, srv.debugURL, srv.logPath)

	for _, sc := range selected {
		if ctx.Err() != nil {
			break
		}
		logf("scenario %s: %s", sc.Name, sc.Title)
		t0, logFrom := time.Now(), srv.logSize()
		if err := useWorkers(ctx, srv, env, cmp.Or(sc.Workers, o.workers), append(slices.Clip(o.settings), sc.Settings...)); err != nil {
			report.Sections = append(report.Sections, Section{Scenario: sc, Table: Table{Err: err.Error(), Elapsed: time.Since(t0)}})
			logf("scenario %s: %v\n--- tail of %s ---\n%s", sc.Name, err, srv.logPath, srv.logTail(40))
			break
		}
		profiled := func() string { return "" }
		if o.profile != "" {
			profiled = captureProfile(ctx, srv.debugURL, o.profileFor, filepath.Join(o.profile, sc.Name+".pprof"))
		}
		env.Timeout, env.NoWaits = max(o.timeout, sc.MinTimeout), sc.NoWaitSampling
		table, err := sc.Run(ctx, env)
		table.Elapsed = time.Since(t0)
		if note := profiled(); note != "" {
			table.Notes = append(table.Notes, note)
		}
		if p := srv.logProblems(logFrom); p != "" {
			table.Notes = append(table.Notes, p)
			logf("  %s", p)
		}
		if err != nil {
			table.Err = err.Error()
			logf("scenario %s failed: %v\n--- tail of %s ---\n%s", sc.Name, err, srv.logPath, srv.logTail(40))
		}
		if srv.exited() {
			table.Err = strings.TrimSpace(table.Err + "; sluice exited during the scenario")
		}
		report.Sections = append(report.Sections, Section{Scenario: sc, Table: table})
		for _, r := range table.Rows {
			logf("  %-28s median %s  (%s)  %s", r.Metric.Name, r.Metric.format(r.Median),
				r.Metric.format(r.Min)+"–"+r.Metric.format(r.Max), r.verdict())
		}
		if o.update { // a long update keeps what it has done so far
			report.Elapsed = time.Since(started)
			if err := report.write(o.out); err != nil {
				return err
			}
		}
		if srv.exited() {
			break
		}
	}
	report.Interrupted = ctx.Err() != nil
	report.Shutdown = srv.stop()
	report.Elapsed = time.Since(started)
	if err := report.write(o.out); err != nil {
		return err
	}
	logf("wrote %s (%s total)", o.out, report.Elapsed.Round(time.Second))
	if report.Interrupted {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return nil
}

// newEnv is what the scenarios get to run against srv.
func newEnv(ctx context.Context, o options, srv *server) *Env {
	env := &Env{
		Runs:        o.runs,
		Quick:       o.quick,
		Timeout:     o.timeout,
		LatencyRate: o.latencyRate,
		API:         newClient(srv.baseURL, srv.apiKey),
		Sluice: func(ctx context.Context, args ...string) ([]byte, error) {
			return runCmd(ctx, srv.env, srv.bin, args...)
		},
		DB:       srv.db,
		WaitDB:   srv.waitDB,
		Procs:    Procs{Sluice: srv.pids(), Postmaster: findPostmaster(ctx, srv.db)},
		IdleWait: o.idleWait,

		SearchDeliveries: o.searchDeliveries,
		SearchRequests:   o.searchRequests,

		SluiceBin: srv.bin,
		DebugURL:  srv.debugURL,
	}
	env.Relaunch = func(ctx context.Context, settings []string) error {
		return restart(ctx, srv, env, o.workers, append(slices.Clip(o.settings), settings...))
	}
	return env
}

// useWorkers restarts sluice with workers worker processes unless that
// many run already, and points the CPU accounting at the new processes.
func useWorkers(ctx context.Context, srv *server, env *Env, workers int, settings []string) error {
	if srv.workerCount() == workers && slices.Equal(srv.settings, settings) {
		return nil
	}
	return restart(ctx, srv, env, workers, settings)
}

// restart restarts sluice with workers worker processes and settings,
// and points the CPU accounting at the new processes.
func restart(ctx context.Context, srv *server, env *Env, workers int, settings []string) error {
	srv.settings = settings
	logf("restarting sluice with %d worker process(es) %v", workers, settings)
	stopped, err := srv.relaunch(ctx, workers)
	if err != nil {
		return fmt.Errorf("restart sluice with %d workers (the old processes: %s): %w", workers, stopped, err)
	}
	env.Procs.Sluice = srv.pids()
	return nil
}

// logf prints a progress line to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
