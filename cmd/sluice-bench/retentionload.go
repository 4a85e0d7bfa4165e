package main

import (
	"context"
	"fmt"
	"time"
)

// aroundDrop is the healthy load of one retention run, with the drop in
// its middle.
type aroundDrop struct {
	before, during window
	gap            time.Duration // longest gap between receipts, drop ± 2 s
	drop           dropped
	rate           float64 // deliveries/s, first post → last receipt
	cpu            cpuUse
	note           string
}

// loadAroundDrop offers the healthy load for warm-up + 2 windows, drops
// day retentionLeadIn into the second window, and waits for the load's
// deliveries.
func loadAroundDrop(ctx context.Context, env *Env, receivers Receivers, run int, day time.Time, pgss bool) (w aroundDrop, err error) {
	sinks, err := newSinks(ctx, env.API, receivers, 100, func(i int) string {
		return fmt.Sprintf("bench.retention.r%d.%d", run, i)
	})
	if err != nil {
		return w, fmt.Errorf("set up healthy endpoints: %w", err)
	}
	defer func() { w.note = joinNotes(w.note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()

	cpu := env.measureCPU()
	start := time.Now()
	done := inBackground(func() (int, int, error) {
		return offerLoad(ctx, env.API, sinks.Types, retentionRate, retentionWarm+2*retentionWindow)
	})
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(start.Add(retentionWarm + retentionWindow + retentionLeadIn))):
	}
	w.drop, err = dropDay(ctx, env.DB, day, pgss)
	o := <-done // offerLoad is bounded by its duration and ctx
	if err != nil {
		return w, err
	}
	if o.err != nil {
		return w, fmt.Errorf("healthy load: %w", o.err)
	}
	if o.skipped > 0 {
		w.note = joinNotes(w.note, fmt.Sprintf("load generator skipped %d ticks", o.skipped))
	}
	drainCtx, cancel := context.WithTimeout(ctx, retentionSettling)
	arr := sinks.Await(drainCtx, o.accepted)
	cancel()
	w.cpu = cpu()
	if arr.Unique < o.accepted {
		return w, fmt.Errorf("%d of %d healthy deliveries arrived within %s of the load's end", arr.Unique, o.accepted, retentionSettling)
	}
	if arr.Duplicates > 0 {
		w.note = joinNotes(w.note, fmt.Sprintf("%d duplicate deliveries", arr.Duplicates))
	}
	w.rate = float64(arr.Unique) / arr.Last.Sub(start).Seconds()
	split := start.Add(retentionWarm + retentionWindow)
	w.before = latencyWindow(arr.First, start.Add(retentionWarm), split)
	w.during = latencyWindow(arr.First, split, split.Add(retentionWindow))
	w.gap = longestGap(arr.First, w.drop.start.Add(-2*time.Second), w.drop.lastWork().Add(2*time.Second))
	if d := w.drop.start.Sub(split); d < retentionLeadIn/2 || d > 2*retentionLeadIn {
		w.note = joinNotes(w.note, fmt.Sprintf("the drop began %s into the during window (meant: %s)", d.Round(time.Millisecond), retentionLeadIn))
	}
	if len(w.drop.lockFails) > 0 {
		w.note = joinNotes(w.note, fmt.Sprintf("%d tries failed for want of a lock (after %v each), then a second's wait", len(w.drop.lockFails), w.drop.lockFails))
		for i, b := range w.drop.blockers {
			w.note = joinNotes(w.note, fmt.Sprintf("try %d blocked (150 ms in) by: %s", i+1, b))
		}
	}
	if o := w.cpu.others(); o > 0.1 {
		w.note = joinNotes(w.note, fmt.Sprintf("other processes used %.2f cores", o))
	}
	return w, nil
}

// values puts what the load and the drop measured into a run's values.
func (w aroundDrop) values(v map[string]float64) {
	dbMS := ms(w.drop.wall())
	if w.drop.execMS >= 0 {
		v["retire, sluice_retire_week (pg_stat_statements)"] = w.drop.execMS
		dbMS = w.drop.execMS + ms(w.drop.commit)
	}
	v["drop, database time"] = dbMS + ms(w.drop.keep) + ms(w.drop.removal.db)
	v["retire, sluice_retire_week at the client"] = ms(w.drop.call)
	v["retire, COMMIT at the client"] = ms(w.drop.commit)
	v["retire, wall time (tries and waits included)"] = ms(w.drop.wall())
	v["retire, tries"] = float64(w.drop.tries)
	v["keep, its transaction at the client"] = ms(w.drop.keep)
	v["removal, pieces dropped (indexes, foreign keys, tables)"] = float64(w.drop.removal.pieces)
	v["removal, tries given up for a lock and made again"] = float64(w.drop.removal.lockFails)
	v["removal, their transactions at the client"] = ms(w.drop.removal.db)
	v["removal, longest one"] = ms(w.drop.removal.largest)
	v["keep and removal, wall time (pauses included)"] = ms(w.drop.lastWork().Sub(w.drop.end))
	v["healthy p50, before"], v["healthy p99, before"], v["healthy max, before"] = w.before.p50, w.before.p99, w.before.max
	v["healthy p50, during"], v["healthy p99, during"], v["healthy max, during"] = w.during.p50, w.during.p99, w.during.max
	if w.before.p99 > 0 {
		v["healthy p99, during ÷ before"] = w.during.p99 / w.before.p99
	}
	v["longest gap between receipts, drop ± 2 s"] = ms(w.gap)
	v["delivered"] = w.rate
}
