package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// Blocked endpoints: 5,000 endpoints that cannot be sent to (half
// throttled, half with an open circuit), each holding a few queued
// deliveries, beside 100 healthy endpoints under a steady load.

var blockedScenario = Scenario{
	Name:  "blocked-5000",
	Title: "5,000 blocked endpoints (throttled or circuit open) beside 100 healthy ones",
	What: "100 loopback receivers, one healthy endpoint each (max_in_flight 100), get 500 events/s in total (a " +
		"small batch every 10 ms, as in isolation) for 10 s per phase after 2 s of unmeasured warm-up; latency = " +
		"receipt time − sent_ns over the first delivery of each event. Phase A: the healthy endpoints alone. Then " +
		"5,000 more endpoints (max_in_flight 10) are created through the API (16 parallel clients; each with its own " +
		"path on one of 20 receivers): 2,500 on receivers answering 429 with `Retry-After: 3600`, subscribed to one " +
		"event type, and 2,500 on receivers answering 500, subscribed to another; 5 events of each type are posted " +
		"(25,000 deliveries). The run waits until every one of the first half is throttled for ~1 h and every one of " +
		"the second has its circuit open (5 consecutive failures, the default SLUICE_CIRCUIT_THRESHOLD; the default " +
		"SLUICE_CIRCUIT_PROBE of 1 min, so the measurement ends before the first probe is due), then 3 s more, a " +
		"VACUUM (ANALYZE) of the tables the setup wrote (what autovacuum would otherwise do in the middle of a " +
		"measurement, at its own time), and until Postgres uses under 0.05 cores over a second (at most 20 s, noted; the " +
		"same wait, vacuum included, precedes the idle window before them). " +
		"Phase B: the same healthy load beside them. Then the blocked endpoints' 5,000 subscriptions are deleted " +
		"(they stay blocked, their deliveries queued) and after 3 s phase C: the same load again, so that C − A is " +
		"what waiting costs and B − C what routing each event past 5,000 more subscriptions costs. Targets: healthy " +
		"p99 in B (and C) ≤ 1.2 × A, and Sluice + Postgres CPU in B (and C) no more than 0.05 cores above A. CPU is also measured over 5 s windows with no load, 3 s after " +
		"the warm-up before the blocked endpoints exist, and while they wait (same target on the difference). At the end of a run the " +
		"blocked endpoints are disabled through the API (the quiescence check before later runs ignores disabled " +
		"endpoints' queued deliveries and jobs).",
	Run:        blocked,
	MinTimeout: 4 * time.Minute,
}

// blockedSettledCores is the most Postgres (and other processes) may use,
// over a second, before an idle window or phase B is measured: the
// blocked endpoints' setup (5,000 endpoints, 25,000 deliveries, 5,000
// parked jobs) is followed by a vacuum of those tables, which is not what
// waiting costs. The wait is bounded (20 s after blocking, so that
// phase B still ends before the first circuit probe) and noted.
const blockedSettledCores = 0.05

// blockedSetupTables are the tables the blocked endpoints' setup writes,
// vacuumed (and analyzed) by the benchmark once it is done, so that
// autovacuum does not do it during a measurement.
const blockedSetupTables = "endpoints, subscriptions, destination_throttle, alerts, " + jobs.JobTable + ", events, deliveries, delivery_attempts"

const (
	blockedHealthy     = 100
	blockedRate        = 500.0
	blockedPerEndpoint = 5 // queued deliveries per blocked endpoint
	blockedReceivers   = 10
)

func blocked(ctx context.Context, env *Env) (Table, error) {
	nBlocked := env.size(5000, 500)
	duration := time.Duration(env.size(10, 3)) * time.Second
	idle := time.Duration(env.size(5, 2)) * time.Second
	metrics := []Metric{
		{Name: "healthy p99, B ÷ A", Unit: "×", Target: 1.2, AtMost: true},
		{Name: "Sluice + Postgres, B − A", Unit: "cores", Target: 0.05, AtMost: true},
		{Name: "healthy p99, C ÷ A", Unit: "×", Target: 1.2, AtMost: true},
		{Name: "Sluice + Postgres, C − A", Unit: "cores", Target: 0.05, AtMost: true},
		{Name: "Sluice + Postgres, idle: blocked − alone", Unit: "cores", Target: 0.05, AtMost: true},
		{Name: "healthy p50, A alone", Unit: "ms"},
		{Name: "healthy p99, A alone", Unit: "ms"},
		{Name: "healthy p50, B beside blocked", Unit: "ms"},
		{Name: "healthy p99, B beside blocked", Unit: "ms"},
		{Name: "healthy p50, C beside blocked, unsubscribed", Unit: "ms"},
		{Name: "healthy p99, C beside blocked, unsubscribed", Unit: "ms"},
		{Name: "Sluice CPU, A", Unit: "cores"},
		{Name: "Postgres CPU, A", Unit: "cores"},
		{Name: "Sluice CPU, B", Unit: "cores"},
		{Name: "Postgres CPU, B", Unit: "cores"},
		{Name: "Sluice CPU, C", Unit: "cores"},
		{Name: "Postgres CPU, C", Unit: "cores"},
		{Name: "Sluice CPU, idle alone", Unit: "cores"},
		{Name: "Postgres CPU, idle alone", Unit: "cores"},
		{Name: "Sluice CPU, idle + blocked", Unit: "cores"},
		{Name: "Postgres CPU, idle + blocked", Unit: "cores"},
		{Name: "blocked endpoints set up", Unit: "s"},
		{Name: "requests to blocked receivers while measured", Unit: "requests"},
	}
	receivers := newReceivers(blockedHealthy)
	defer receivers.Close()
	throttling, failing := newReceivers(blockedReceivers), newReceivers(blockedReceivers)
	defer throttling.Close()
	defer failing.Close()
	for _, r := range throttling {
		r.Answer(receiver.Behavior{Status: http.StatusTooManyRequests, RetryAfter: "3600"})
	}
	for _, r := range failing {
		r.Answer(receiver.Behavior{Status: http.StatusInternalServerError})
	}
	blockedCount := func() int {
		n := 0
		for _, rs := range []Receivers{throttling, failing} {
			for _, r := range rs {
				n += r.Count()
			}
		}
		return n
	}

	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		sinks, err := newSinks(ctx, env.API, receivers, 100, func(i int) string {
			return fmt.Sprintf("bench.blocked.r%d.%d", run, i)
		})
		if err != nil {
			return s, fmt.Errorf("set up healthy endpoints: %w", err)
		}
		defer func() { s.Note = joinNotes(s.Note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
		cpuValues := func(label string, u cpuUse) {
			s.Values["Sluice CPU, "+label] = u.cores(u.sluice)
			s.Values["Postgres CPU, "+label] = u.cores(u.postgres)
		}

		if _, err := healthyPhaseAt(ctx, env, sinks, blockedRate, 2*time.Second); err != nil {
			return s, fmt.Errorf("warm-up: %w", err)
		}
		settle := func(label string, limit time.Duration) { // let the work before, and Postgres's vacuum of it, settle
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
			if _, err := env.DB.Exec(ctx, "/* bench-drain */ VACUUM (ANALYZE) "+blockedSetupTables); err != nil {
				s.Note = joinNotes(s.Note, label+": vacuum: "+err.Error())
			}
			t0 := time.Now()
			if note := env.waitIdleBelow(ctx, limit, blockedSettledCores); note != "" {
				s.Note = joinNotes(s.Note, label+": "+note)
			} else if waited := time.Since(t0); waited > 2*time.Second {
				s.Note = joinNotes(s.Note, fmt.Sprintf("%s: waited %s more for Postgres to settle", label, waited.Round(100*time.Millisecond)))
			}
		}
		settle("after the warm-up", 60*time.Second)
		idleAlone := env.idleCPU(ctx, idle)
		cpuValues("idle alone", idleAlone)
		a, err := healthyPhaseAt(ctx, env, sinks, blockedRate, duration)
		if err != nil {
			return s, fmt.Errorf("phase A: %w", err)
		}

		t0 := time.Now()
		ids, subs, err := makeBlocked(ctx, env, run, nBlocked, throttling, failing)
		defer func() {
			// Disabled, they cost the next runs nothing and the quiescence
			// check ignores them.
			if err := parallel(len(ids), 16, func(i int) error {
				if ids[i] == "" {
					return nil
				}
				return env.API.do(context.WithoutCancel(ctx), http.MethodPatch, "/v1/endpoints/"+ids[i],
					map[string]any{"disabled": true}, http.StatusOK, nil)
			}); err != nil {
				s.Note = joinNotes(s.Note, "disabling the blocked endpoints: "+err.Error())
			}
		}()
		if err != nil {
			return s, err
		}
		note, err := awaitBlocked(ctx, env, ids)
		s.Note = joinNotes(s.Note, note)
		if err != nil {
			return s, err
		}
		s.Values["blocked endpoints set up"] = time.Since(t0).Seconds()
		settle("after blocking", 20*time.Second) // the first circuits' probes are due a minute after they opened

		before := blockedCount()
		idleBlocked := env.idleCPU(ctx, idle)
		cpuValues("idle + blocked", idleBlocked)
		b, err := healthyPhaseAt(ctx, env, sinks, blockedRate, duration)
		if err != nil {
			return s, fmt.Errorf("phase B: %w", err)
		}
		if err := parallel(len(subs), 16, func(i int) error { return env.API.DeleteSubscription(ctx, subs[i]) }); err != nil {
			return s, fmt.Errorf("delete the blocked endpoints' subscriptions: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
		c, err := healthyPhaseAt(ctx, env, sinks, blockedRate, duration)
		if err != nil {
			return s, fmt.Errorf("phase C: %w", err)
		}
		end := time.Now()
		s.Values["requests to blocked receivers while measured"] = float64(blockedCount() - before)

		var firstProbe *time.Time
		var queued int
		if err := env.DB.QueryRow(ctx, `
			SELECT (SELECT min(circuit_next_probe_at) FROM endpoints WHERE id = ANY($1::uuid[])),
			       (SELECT count(*) FROM deliveries WHERE endpoint_id = ANY($1::uuid[]) AND status IN ('pending', 'failed'))`,
			ids).Scan(&firstProbe, &queued); err != nil {
			return s, fmt.Errorf("read the blocked endpoints: %w", err)
		}
		s.Note = joinNotes(s.Note, fmt.Sprintf("%d deliveries queued on the blocked endpoints at the end", queued))
		if firstProbe != nil && firstProbe.Before(end) {
			s.Note = joinNotes(s.Note, fmt.Sprintf("**the first circuit probe was due %s before the measurement ended**",
				end.Sub(*firstProbe).Round(time.Millisecond)))
		}

		s.Values["healthy p50, A alone"] = a.lat.Values["p50"]
		s.Values["healthy p99, A alone"] = a.lat.Values["p99"]
		s.Values["healthy p50, B beside blocked"] = b.lat.Values["p50"]
		s.Values["healthy p99, B beside blocked"] = b.lat.Values["p99"]
		s.Values["healthy p50, C beside blocked, unsubscribed"] = c.lat.Values["p50"]
		s.Values["healthy p99, C beside blocked, unsubscribed"] = c.lat.Values["p99"]
		if a.lat.Values["p99"] > 0 {
			s.Values["healthy p99, B ÷ A"] = b.lat.Values["p99"] / a.lat.Values["p99"]
			s.Values["healthy p99, C ÷ A"] = c.lat.Values["p99"] / a.lat.Values["p99"]
		}
		cpuValues("A", a.cpu)
		cpuValues("B", b.cpu)
		cpuValues("C", c.cpu)
		s.Values["Sluice + Postgres, B − A"] = b.cpu.cores(b.cpu.sluice+b.cpu.postgres) - a.cpu.cores(a.cpu.sluice+a.cpu.postgres)
		s.Values["Sluice + Postgres, C − A"] = c.cpu.cores(c.cpu.sluice+c.cpu.postgres) - a.cpu.cores(a.cpu.sluice+a.cpu.postgres)
		s.Values["Sluice + Postgres, idle: blocked − alone"] = idleBlocked.cores(idleBlocked.sluice+idleBlocked.postgres) -
			idleAlone.cores(idleAlone.sluice+idleAlone.postgres)
		s.CPU = a.cpu.add(b.cpu).add(c.cpu)
		s.TimedOut = a.lat.TimedOut || b.lat.TimedOut || c.lat.TimedOut
		for _, p := range []struct {
			name string
			ph   isoPhase
		}{{"phase A", a}, {"phase B", b}, {"phase C", c}} {
			if p.ph.lat.Note != "" {
				s.Note = joinNotes(s.Note, p.name+": "+p.ph.lat.Note)
			}
			if p.ph.skipped > 0 {
				s.Note = joinNotes(s.Note, fmt.Sprintf("%s: load generator skipped %d ticks", p.name, p.ph.skipped))
			}
			if o := p.ph.cpu.others(); o > 0.1 {
				s.Note = joinNotes(s.Note, fmt.Sprintf("%s: other processes used %.2f cores", p.name, o))
			}
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d healthy endpoints at %.0f events/s for %s per phase; %d blocked endpoints "+
		"(half throttled, half circuit open) with %d queued deliveries each, created anew in each run and disabled after it",
		blockedHealthy, blockedRate, duration, nBlocked, blockedPerEndpoint))
	return t, err
}

// makeBlocked creates n endpoints, the first half on the throttling
// receivers and subscribed to one type, the second half on the failing
// ones and subscribed to another, and posts blockedPerEndpoint events of
// each type. It returns the endpoints' and the subscriptions' ids (those
// it made, on error).
func makeBlocked(ctx context.Context, env *Env, run, n int, throttling, failing Receivers) (ids, subs []string, err error) {
	ids, subs = make([]string, n), make([]string, n)
	types := [2]string{fmt.Sprintf("bench.blocked.r%d.throttled", run), fmt.Sprintf("bench.blocked.r%d.failing", run)}
	err = parallel(n, 16, func(i int) error {
		half, rs := 0, throttling
		if i >= n/2 {
			half, rs = 1, failing
		}
		id, err := env.API.CreateEndpoint(ctx, fmt.Sprintf("%s/r%d/%d", rs[i%len(rs)].URL(), run, i), 10)
		if err != nil {
			return err
		}
		ids[i] = id
		subs[i], err = env.API.Subscribe(ctx, id, types[half])
		return err
	})
	if err != nil {
		return ids, subs, fmt.Errorf("create the blocked endpoints: %w", err)
	}
	var evs []EventIn
	for _, typ := range types {
		for k := range blockedPerEndpoint {
			evs = append(evs, EventIn{Type: typ, Payload: payload(0, k)})
		}
	}
	if err := env.API.PostBatch(ctx, batchBody(evs)); err != nil {
		return ids, subs, fmt.Errorf("post the blocked endpoints' events: %w", err)
	}
	return ids, subs, nil
}

// awaitBlocked waits (at most 2 min) until the first half of ids is
// throttled for more than 30 min, the second half has its circuit open and
// no dispatch job of theirs is running or due: all parked (a parked job is
// 'available' with scheduled_at when the throttle or circuit lifts).
func awaitBlocked(ctx context.Context, env *Env, ids []string) (string, error) {
	half := len(ids) / 2
	endpointIDs, err := parseUUIDs(ids)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var throttled, open int
		err := env.DB.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM destination_throttle
			         WHERE endpoint_id = ANY($1::uuid[]) AND throttled_until > now() + interval '30 minutes'),
			       (SELECT count(*) FROM endpoints WHERE id = ANY($2::uuid[]) AND circuit_state = 'open')`,
			ids[:half], ids[half:]).Scan(&throttled, &open)
		if err != nil {
			return "", fmt.Errorf("read the blocked endpoints' state: %w", err)
		}
		active, err := jobs.CountActiveDispatch(ctx, env.DB, endpointIDs)
		if err != nil {
			return "", fmt.Errorf("read the blocked endpoints' jobs: %w", err)
		}
		if throttled == half && open == len(ids)-half && active == 0 {
			return "", nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("blocked endpoints not all blocked after 2 min: %d of %d throttled, %d of %d circuits open, %d dispatch jobs active",
				throttled, half, open, len(ids)-half, active)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
