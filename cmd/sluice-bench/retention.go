package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// Retention: a day of 2,000,000 delivered deliveries dropped, as the
// retention job drops an expired day, while 100 healthy endpoints are
// delivered to at a steady rate.

var retentionScenario = Scenario{
	Name:  "retention",
	Title: "Retention of a day of 2,000,000 delivered deliveries while delivery continues at 2,000/s",
	What: "Once: 100 loopback receivers, and 20 more endpoints (created through the API, never subscribed) that own " +
		"the old day's deliveries. Each run seeds the first day of a week of its own, 2 + run weeks ago (UTC; older than the default " +
		"SLUICE_RETENTION of 14 days, younger than the 30 of SLUICE_DEAD_RETENTION): `sluice_ensure_week`, then one " +
		"SQL statement per table: 100,000 events spread evenly over the day (UUIDv7 ids of their millisecond, " +
		"~200-byte payloads), each delivered to all 20 endpoints (2,000,000 deliveries, status 'delivered', one 200 " +
		"attempt each), and 300 more events with one delivery each, dead since now (status 'dead', one 500 attempt): " +
		"what retention must keep. Then VACUUM (ANALYZE) of the day's partitions and a CHECKPOINT, so the day is on " +
		"disk as an old day is. Then 100 healthy endpoints (max_in_flight 100, one event type each) are offered " +
		"2,000 events/s (a small batch every 10 ms, as in latency) for 22 s. 12 s in, the benchmark drops the day " +
		"as the retention job does, in three steps: retire (a transaction of its own, `SET LOCAL lock_timeout` of 20 ms, " +
		"`SELECT sluice_retire_week(week)`, COMMIT, retried after 250 ms ± a fifth (at most 100 times) when it fails " +
		"with lock_not_available (55P03)); keep (`SELECT sluice_keep_retired(now() - interval '30 days')` in a " +
		"transaction of its own); removal (`SELECT sluice_drop_expired()`, one index, table's foreign keys or table a transaction, " +
		"retention.RemovePause (100 ms) apart, until none is left; a try that fails with lock_not_available is made again " +
		"250 ms later, as the job does). Latency = receipt time − sent_ns over the first " +
		"delivery of each event; 'before' is the events sent 1.5–11.5 s in, 'during' those sent 11.5–21.5 s in (from " +
		"0.5 s before the drop, so that deliveries in flight when it takes its locks count as during; the removal ends " +
		"within the window). Database time of the drop = pg_stat_statements' total_exec_time of the successful retire " +
		"+ its COMMIT's time at the client + the keep's and the removal's transactions at the client (loopback; " +
		"pg_stat_statements does not count a commit, where Postgres removes a dropped relation's files, about 1.3 GB " +
		"in all). Targets: that ≤ 1 s, healthy p99 during ≤ 1.2 × before, and the kept " +
		"deliveries, events and attempts in the kept partitions equal to the dead ones seeded, in every run.",
	Run:        retention,
	MinTimeout: 6 * time.Minute,
}

const (
	retentionHealthy  = 100
	retentionOldEPs   = 20
	retentionRate     = 2000.0
	retentionDead     = 300
	retentionWarm     = 1500 * time.Millisecond
	retentionWindow   = 10 * time.Second
	retentionLeadIn   = 500 * time.Millisecond // the during window starts this long before the drop
	retentionSettling = 15 * time.Second       // longest wait for the last deliveries after the load
)

func retention(ctx context.Context, env *Env) (Table, error) {
	perEndpoint := env.size(100000, 5000)
	nDeliveries := perEndpoint * retentionOldEPs
	rows := fmt.Sprintf("%d", nDeliveries)
	metrics := []Metric{
		{Name: "drop, database time", Unit: "ms", Target: 1000, AtMost: true},
		{Name: "healthy p99, during ÷ before", Unit: "×", Target: 1.2, AtMost: true},
		{Name: "kept = dead seeded (1 = yes)", Unit: "", Target: 1, Worst: true},
		{Name: "deliveries dropped", Unit: ""},
		{Name: "rows dropped (events + deliveries + attempts)", Unit: ""},
		{Name: "deliveries kept", Unit: ""},
		{Name: "retire, sluice_retire_week (pg_stat_statements)", Unit: "ms"},
		{Name: "retire, sluice_retire_week at the client", Unit: "ms"},
		{Name: "retire, COMMIT at the client", Unit: "ms"},
		{Name: "retire, wall time (tries and waits included)", Unit: "ms"},
		{Name: "retire, tries", Unit: ""},
		{Name: "keep, its transaction at the client", Unit: "ms"},
		{Name: "removal, pieces dropped (indexes, foreign keys, tables)", Unit: ""},
		{Name: "removal, tries given up for a lock and made again", Unit: ""},
		{Name: "removal, their transactions at the client", Unit: "ms"},
		{Name: "removal, longest one", Unit: "ms"},
		{Name: "keep and removal, wall time (pauses included)", Unit: "ms"},
		{Name: "healthy p50, before", Unit: "ms"},
		{Name: "healthy p99, before", Unit: "ms"},
		{Name: "healthy max, before", Unit: "ms"},
		{Name: "healthy p50, during", Unit: "ms"},
		{Name: "healthy p99, during", Unit: "ms"},
		{Name: "healthy max, during", Unit: "ms"},
		{Name: "longest gap between receipts, drop ± 2 s", Unit: "ms"},
		{Name: "delivered", Unit: "deliveries/s"},
		{Name: "seeding " + rows + " deliveries (inserts)", Unit: "s"},
		{Name: "VACUUM ANALYZE of the day", Unit: "s"},
		{Name: "CHECKPOINT after the seed", Unit: "s"},
	}
	receivers := newReceivers(retentionHealthy)
	defer receivers.Close()
	var t Table
	eps := make([]string, retentionOldEPs)
	err := parallel(len(eps), 8, func(i int) error {
		id, err := env.API.CreateEndpoint(ctx, fmt.Sprintf("%s/old%d", receivers[i].URL(), i), 100)
		eps[i] = id
		return err
	})
	if err != nil {
		return t, fmt.Errorf("create the old day's endpoints: %w", err)
	}
	tenant, err := endpointTenant(ctx, env, eps[0])
	if err != nil {
		return t, err
	}
	pgss, note := pgssReady(ctx, env)
	if note != "" {
		t.Notes = append(t.Notes, note+": database time of the drop is its wall time instead")
	}
	waited, err := awaitRetentionJob(ctx, env)
	if err != nil {
		return t, err
	}
	t.Notes = append(t.Notes, fmt.Sprintf("waited %s for Sluice's own retention job (run on start, then hourly) to "+
		"complete once before seeding, so that it does not drop a seeded day itself", waited.Round(100*time.Millisecond)))

	rt, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		// The Monday of a week of its own, 2 + run weeks ago: past the
		// default SLUICE_RETENTION of 14 days, and its partitions dropped
		// whole (the seed fills its first day).
		day := store.PartitionWeek(time.Now().AddDate(0, 0, -7*(2+run)))
		s.Note = "load average " + loadAverage()
		seeded, err := seedOldDay(ctx, env.DB, day, tenant, eps, perEndpoint, retentionDead)
		if err != nil {
			return s, err
		}
		s.Values["seeding "+rows+" deliveries (inserts)"] = seeded.insert.Seconds()
		s.Values["VACUUM ANALYZE of the day"] = seeded.vacuum.Seconds()
		s.Values["CHECKPOINT after the seed"] = seeded.checkpoint.Seconds()
		if seeded.checkpointErr != "" {
			s.Note = joinNotes(s.Note, "CHECKPOINT failed: "+seeded.checkpointErr)
		}
		w, err := loadAroundDrop(ctx, env, receivers, run, day, pgss)
		s.Note = joinNotes(s.Note, w.note)
		if err != nil {
			return s, err
		}
		s.CPU = w.cpu
		events, deliveries, dead, attempts, err := keptRows(ctx, env.DB, day)
		if err != nil {
			return s, err
		}
		ok := events == seeded.dead && deliveries == seeded.dead && dead == seeded.dead && attempts == seeded.dead &&
			w.drop.kept == int64(seeded.dead)
		s.Values["kept = dead seeded (1 = yes)"] = map[bool]float64{true: 1, false: 0}[ok]
		if !ok {
			s.Note = joinNotes(s.Note, fmt.Sprintf("**kept: sluice_keep_retired said %d; the kept partitions hold %d events, %d deliveries "+
				"(%d dead), %d attempts of the day; seeded %d dead**", w.drop.kept, events, deliveries, dead, attempts, seeded.dead))
		}
		s.Values["deliveries dropped"] = float64(seeded.deliveries - deliveries)
		s.Values["rows dropped (events + deliveries + attempts)"] = float64(seeded.events + seeded.deliveries + seeded.attempts -
			events - deliveries - attempts)
		s.Values["deliveries kept"] = float64(deliveries)
		w.values(s.Values)
		s.Note = joinNotes(s.Note, "load average after "+loadAverage())
		return s, nil
	})
	rt.Notes = append(t.Notes, rt.Notes...)
	rt.Notes = append(rt.Notes, fmt.Sprintf("per run: %d events × %d endpoints delivered + %d dead on a day of its own; "+
		"%d healthy endpoints at %.0f events/s; the kept rows stay in the *_kept partitions after the scenario",
		perEndpoint, retentionOldEPs, retentionDead, retentionHealthy, retentionRate))
	return rt, err
}

// awaitRetentionJob waits (at most 2 min) until Sluice's retention job,
// which River's leader runs once when elected and then every hour, has
// completed since the current leader was elected (a scenario before may
// have restarted Sluice, whose new leader runs it again).
func awaitRetentionJob(ctx context.Context, env *Env) (time.Duration, error) {
	t0 := time.Now()
	for {
		done, err := jobs.CompletedSinceElection(ctx, env.DB, jobs.RetentionArgs{}.Kind())
		if err != nil {
			return time.Since(t0), fmt.Errorf("read the retention job: %w", err)
		}
		if done {
			return time.Since(t0), nil
		}
		if time.Since(t0) > 2*time.Minute || ctx.Err() != nil {
			return time.Since(t0), fmt.Errorf("sluice's retention job has not completed after %s", time.Since(t0).Round(time.Second))
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// sentAt is when the event of a delivery was posted (its data.sent_ns).
func sentAt(r receiver.Request) (time.Time, bool) {
	var body struct {
		Data struct {
			SentNS int64 `json:"sent_ns"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Data.SentNS == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, body.Data.SentNS), true
}

// window is the latency of the first deliveries of the events sent in
// [from, to).
type window struct {
	n             int
	p50, p99, max float64 // ms
}

func latencyWindow(first []receiver.Request, from, to time.Time) window {
	var lat []time.Duration
	for _, r := range first {
		if at, ok := sentAt(r); ok && !at.Before(from) && at.Before(to) {
			lat = append(lat, r.At.Sub(at))
		}
	}
	return window{n: len(lat), p50: ms(percentile(lat, 50)), p99: ms(percentile(lat, 99)), max: ms(percentile(lat, 100))}
}

// longestGap is the longest time between consecutive receipts in [from, to).
func longestGap(first []receiver.Request, from, to time.Time) time.Duration {
	var at []time.Time
	for _, r := range first {
		if !r.At.Before(from) && r.At.Before(to) {
			at = append(at, r.At)
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i].Sub(at[i-1]))
	}
	return gap
}
