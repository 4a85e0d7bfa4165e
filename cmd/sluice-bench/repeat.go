package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/jobs"
)

// Repeat runs once env.Runs times, each after the previous run's work has
// drained and within env.Timeout, and aggregates the metrics. It stops at
// the first error.
func (e *Env) Repeat(ctx context.Context, metrics []Metric, once func(ctx context.Context, run int) (Sample, error)) (Table, error) {
	var (
		t       Table
		samples []Sample
		cpu     cpuUse
		waits   waitStats
	)
	for run := 1; run <= e.Runs; run++ {
		waitStart := time.Now()
		if note := e.quiesce(ctx, 60*time.Second); note != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: %s", run, note))
		} else if waited := time.Since(waitStart); waited > time.Second {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: waited %s for the work of the previous run to drain (queued deliveries, fan-out and dispatch jobs)",
				run, waited.Round(100*time.Millisecond)))
		}
		idleStart := time.Now()
		if note := e.waitIdle(ctx, e.idleWait()); note != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: %s", run, note))
		} else if waited := time.Since(idleStart); waited > 2*time.Second {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: waited %s for Postgres to go idle (autovacuum of earlier writes)",
				run, waited.Round(100*time.Millisecond)))
		}
		if err := ctx.Err(); err != nil {
			return t.aggregate(metrics, samples, cpu, waits), err
		}
		whole, stopWaits := e.measureCPU(), func() waitStats { return waitStats{} }
		if !e.NoWaits {
			stopWaits = sampleWaits(ctx, e.WaitDB)
		}
		runCtx, cancel := context.WithTimeout(ctx, e.Timeout)
		s, err := once(runCtx, run)
		cancel()
		waits = waits.add(stopWaits())
		if s.CPU.wall == 0 {
			s.CPU = whole()
		}
		cpu = cpu.add(s.CPU)
		if err != nil {
			return t.aggregate(metrics, samples, cpu, waits), fmt.Errorf("run %d: %w", run, err)
		}
		if s.Note != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("run %d: %s", run, s.Note))
		}
		samples = append(samples, s)
		logf("  run %d/%d: %s", run, e.Runs, s.summary(metrics))
	}
	return t.aggregate(metrics, samples, cpu, waits), nil
}

func (t Table) aggregate(metrics []Metric, samples []Sample, cpu cpuUse, waits waitStats) Table {
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
		t.Notes = append(t.Notes, "CPU during the measured runs (mean): "+cpu.String())
		if cpu.postgresKnown && cpu.others() > 0.1 {
			t.Disturbed = true
			t.Notes = append(t.Notes, fmt.Sprintf("**Disturbed:** other processes used %.2f cores during these runs, so these numbers are lower than this machine can do", cpu.others()))
		}
	}
	if w := waits.String(); w != "" {
		t.Notes = append(t.Notes, "Sluice's Postgres sessions during the runs (mean number per state, sampled every 50 ms): "+w)
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
	before := readCPU(e.Procs)
	return func() cpuUse { return readCPU(e.Procs).since(before) }
}

// idleWait is the longest a run waits for the machine to be idle
// (-idle-wait; default a minute).
func (e *Env) idleWait() time.Duration {
	if e.IdleWait > 0 {
		return e.IdleWait
	}
	return time.Minute
}

// idleCores is the most other processes, and Postgres on its own, may use
// before a run starts (waitIdle).
const idleCores = 0.15

// waitIdle waits, for at most limit, until other processes on the machine
// use less than idleCores (over one second) and so does Postgres, and
// returns a note when they did not. Sluice has no work left by then
// (quiesce), so what Postgres still does is its own: mostly autovacuum of
// what a scenario before wrote (after ingest-batch, millions of events),
// which would otherwise be counted as this run's cost and slow it down.
func (e *Env) waitIdle(ctx context.Context, limit time.Duration) string {
	return e.waitIdleBelow(ctx, limit, idleCores)
}

// waitIdleBelow is waitIdle with cores in place of idleCores.
func (e *Env) waitIdleBelow(ctx context.Context, limit time.Duration, cores float64) string {
	deadline := time.Now().Add(limit)
	for {
		stop := e.measureCPU()
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(time.Second):
		}
		u := stop()
		postgres := u.cores(u.postgres)
		if !u.postgresKnown || (u.others() < cores && postgres < cores) {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("the machine was not idle: other processes used %.2f cores and Postgres %.2f just before the run (waited %s)",
				u.others(), postgres, limit)
		}
	}
}

// quiesce waits until Sluice has no queued deliveries and no fan-out or
// dispatch job left (those of e.Blocked and of disabled endpoints aside),
// so that runs do not overlap. It returns a note when that did not happen within limit.
func (e *Env) quiesce(ctx context.Context, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	blocked, err := parseUUIDs(e.Blocked)
	if err != nil {
		return "quiescence check failed: " + err.Error()
	}
	for {
		var queued int64
		var disabled []uuid.UUID
		err := e.DB.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM deliveries d WHERE status IN ('pending', 'failed')
			          AND NOT coalesce(endpoint_id::text = ANY($1::text[]), false)
			          AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.disabled)),
			       (SELECT coalesce(array_agg(id), '{}') FROM endpoints WHERE disabled)`, append([]string{}, e.Blocked...)).Scan(&queued, &disabled)
		if err != nil {
			return "quiescence check failed: " + err.Error()
		}
		left, err := jobs.CountLive(ctx, e.DB, []string{jobs.QueueFanout, jobs.QueueDispatch}, append(disabled, blocked...))
		if err != nil {
			return "quiescence check failed: " + err.Error()
		}
		if queued == 0 && left == 0 {
			return ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("not quiet after %s: %d deliveries queued, %d fan-out/dispatch jobs left", limit, queued, left)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
