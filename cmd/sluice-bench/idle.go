package main

import (
	"context"
	"fmt"
	"time"
)

// Idle cost: what Sluice and its Postgres burn with nothing to do, and at
// a trickle of 25 events/s.

var idleScenario = Scenario{
	Name:  "idle",
	Title: "Idle cost: no events, and 25 events/s",
	What: "One loopback receiver behind one endpoint (max_in_flight 10). After the previous work has drained and a 5 s " +
		"settle, CPU is read from /proc over a 20 s window with no events at all (Sluice: every sluice process; " +
		"Postgres: the postmaster, its exited children (cutime) and every live child — the whole cluster, background " +
		"workers included). Then single posts to /v1/events, one every 40 ms (25 events/s), each matching the " +
		"endpoint: 2 s of them unmeasured, each delivered before the window opens (connections and caches warm, as " +
		"in a process that has been serving), then 20 s (500 events); CPU from the first post of those to the end of " +
		"the window (the last delivery received, when later). The benchmark's own CPU (its client and receiver) is " +
		"not counted. Then the floor, for scale: the same posts, 2 s unmeasured and 20 s measured, to a process " +
		"doing the least a webhook post takes (insert the body with a synchronous commit, answer 202, post it to a " +
		"receiver, mark it sent with an asynchronous commit; cmd/sluice-bench/floor.go), its CPU and Postgres's " +
		"(Sluice idles meanwhile: its share of Postgres is in that reading). When Postgres has pg_stat_statements, " +
		"it is reset at the start of each window and read at its end (two statements of the benchmark's, not " +
		"counted), and the notes list what Sluice's statements cost per second. pg_stat_activity is not sampled " +
		"during these runs (its queries would be Postgres CPU). Targets from the scale issue: Sluice + Postgres ≤ " +
		"0.02 cores idle and ≤ 0.05 cores at 25 events/s.",
	Run:            idle,
	MinTimeout:     2 * time.Minute,
	NoWaitSampling: true,
}

const idleRate = 25.0

// warmUp is how long the posts of a window at idleRate go first,
// unmeasured, each delivered before the window opens. A process that has
// been serving has its connections open and its caches filled; without
// it, a window would also count the first posts' connecting (a new
// Postgres backend costs tens of milliseconds), as many times as the
// process happened to open connections then.
const warmUp = 2 * time.Second

// warmTrickle posts to the first type of sinks at idleRate for warmUp and
// waits until they are delivered.
func warmTrickle(ctx context.Context, env *Env, sinks *Sinks) error {
	view := sinks.from()
	n, err := postAtRate(ctx, env.API.PostEvent, sinks.Types[0], idleRate, warmUp)
	if err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	if arr := view.Await(ctx, n); arr.Unique < n {
		return fmt.Errorf("warm up: %d of %d events delivered", arr.Unique, n)
	}
	return nil
}

func idle(ctx context.Context, env *Env) (Table, error) {
	window := time.Duration(env.size(20, 5)) * time.Second
	settle := 5 * time.Second
	metrics := []Metric{
		{Name: "Sluice + Postgres, idle", Unit: "cores", Target: 0.02, AtMost: true},
		{Name: "Sluice + Postgres, 25 events/s", Unit: "cores", Target: 0.05, AtMost: true},
		{Name: "Sluice, idle", Unit: "cores"},
		{Name: "Postgres, idle", Unit: "cores"},
		{Name: "Sluice, 25 events/s", Unit: "cores"},
		{Name: "Postgres, 25 events/s", Unit: "cores"},
		{Name: "delivered, 25 events/s", Unit: "events/s"},
		{Name: "floor + Postgres, 25 events/s", Unit: "cores"},
		{Name: "floor, 25 events/s", Unit: "cores"},
		{Name: "Postgres beside the floor, 25 events/s", Unit: "cores"},
	}
	receivers := newReceivers(1)
	defer receivers.Close()
	pgss, pgssNote := pgssReady(ctx, env)
	var statements [2]string
	// resetStatements and readStatements bracket a window with
	// pg_stat_statements, when Postgres has it: what Sluice asks of it.
	resetStatements := func(ctx context.Context) {
		if pgss {
			_, _ = env.DB.Exec(ctx, `/* bench-drain */ SELECT pg_stat_statements_reset()`)
		}
	}
	readStatements := func(ctx context.Context, k int, label string, wall time.Duration, run int) {
		if !pgss {
			return
		}
		if _, _, top, err := statementTime(ctx, env.DB, wall.Seconds(), "s"); err == nil {
			statements[k] = fmt.Sprintf("run %d, %s: %s", run, label, top)
		}
	}
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		sinks, err := newSinks(ctx, env.API, receivers, 10, func(int) string {
			return fmt.Sprintf("bench.idle.r%d", run)
		})
		if err != nil {
			return s, fmt.Errorf("set up the endpoint: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		cpuValues := func(label string, u cpuUse) {
			s.Values["Sluice, "+label] = u.cores(u.sluice)
			s.Values["Postgres, "+label] = u.cores(u.postgres)
			s.Values["Sluice + Postgres, "+label] = u.cores(u.sluice + u.postgres)
		}
		if env.Procs.Postmaster == 0 {
			s.Note = "the Postgres server was not found on this machine: its CPU is not counted"
		}

		select {
		case <-ctx.Done():
		case <-time.After(settle):
		}
		resetStatements(ctx)
		idleUse := env.idleCPU(ctx, window)
		cpuValues("idle", idleUse)
		readStatements(ctx, 0, "idle", idleUse.wall, run)

		if err := warmTrickle(ctx, env, sinks); err != nil {
			return s, err
		}
		view := sinks.from()
		resetStatements(ctx)
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
		loadUse := stop()
		cpuValues("25 events/s", loadUse)
		readStatements(ctx, 1, "25 events/s", loadUse.wall, run)
		if arr.Unique > 0 {
			s.Values["delivered, 25 events/s"] = float64(arr.Unique) / loadUse.wall.Seconds()
		}
		if arr.Unique < posted {
			s.TimedOut = true
			s.Note = joinNotes(s.Note, fmt.Sprintf("%d of %d events delivered", arr.Unique, posted))
		}
		floor, err := runFloor(ctx, env, idleRate, window)
		if err != nil {
			return s, fmt.Errorf("the floor: %w", err)
		}
		s.Values["floor, 25 events/s"] = floor.use.cores(floor.use.sluice)
		s.Values["Postgres beside the floor, 25 events/s"] = floor.use.cores(floor.use.postgres)
		s.Values["floor + Postgres, 25 events/s"] = floor.use.cores(floor.use.sluice + floor.use.postgres)
		if floor.delivered < int(idleRate*window.Seconds()) {
			s.Note = joinNotes(s.Note, fmt.Sprintf("the floor delivered %d events", floor.delivered))
		}
		s.CPU = idleUse.add(loadUse)
		if o := idleUse.others(); o > 0.1 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("other processes used %.2f cores during the idle window", o))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("idle window %s after a %s settle; then %.0f events/s for %s, one event per POST /v1/events",
		window, settle, idleRate, window))
	if pgssNote != "" {
		t.Notes = append(t.Notes, pgssNote)
	}
	for _, st := range statements {
		if st != "" {
			t.Notes = append(t.Notes, "Sluice's statements by database time (pg_stat_statements, reset at the window's start), "+st)
		}
	}
	return t, err
}

// postAtRate posts single events of typ with post at rate events/s for
// duration (one request at a time: at a trickle the answers come well
// within a tick) and returns how many were accepted.
func postAtRate(ctx context.Context, post func(context.Context, []byte) error, typ string, rate float64, duration time.Duration) (int, error) {
	n := int(rate * duration.Seconds())
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	ok := 0
	for i := range n {
		if err := post(ctx, eventBody(EventIn{Type: typ, Payload: payload(time.Now().UnixNano(), i)})); err != nil {
			if ctx.Err() != nil {
				return ok, nil
			}
			return ok, fmt.Errorf("posting event %d: %w", i, err)
		}
		ok++
		if i < n-1 {
			select {
			case <-ctx.Done():
				return ok, nil
			case <-tick.C:
			}
		}
	}
	return ok, nil
}
