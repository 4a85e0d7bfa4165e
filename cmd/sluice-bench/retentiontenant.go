package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/maintenance"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Retention of a tenant that keeps a day, beside a tenant on the server's
// retention, while a third tenant's deliveries go on.

var tenantRetentionScenario = Scenario{
	Name:  "retention-tenant",
	Title: "A tenant's own retention of a day beside tenants on the server's, under delivery load",
	What: "Each run makes two tenants (`sluice tenant create`), 4 endpoints each (never subscribed), and seeds both alike " +
		"in SQL (as the search scenario seeds): events spread evenly over the 3 days before now (1 h ago at the latest), " +
		"each delivered to 2 of its tenant's endpoints, one delivery in 20 dead, an attempt each; then VACUUM (ANALYZE). " +
		"The benchmark tenant, on the server's retention, has 100 healthy endpoints (max_in_flight 100, one event type " +
		"each) offered events at a steady rate (a small batch every 10 ms, as in latency). 11.5 s in, the first seeded " +
		"tenant sets `PATCH /v1/tenant {\"retention\": \"24h\"}`; right after, its reads are checked: delivered deliveries " +
		"until a day ago (`GET /v1/deliveries?status=delivered&until=`), and `GET /v1/events/{id}` and " +
		"`GET /v1/deliveries/{id}` of an old event all of whose deliveries were delivered (404) — each answered before " +
		"the PATCH. Then the benchmark deletes what is past the day with the retention job's own " +
		"maintenance.ExpireTenant (ExpireTenantDeliveries then ExpireTenantEvents, maintenance.TenantChunk rows a " +
		"statement, each its own transaction, resting as long as each took, until a statement deletes fewer). The load goes on until the deletion ends (at most 30 s after " +
		"the PATCH). Latency = receipt time − sent_ns over the first delivery of each event; 'before' is the events " +
		"sent 1.5–11.5 s in, 'during' those sent from the PATCH to the deletion's end. After the load, the tenant's " +
		"rows past the day that retention does not keep (dead ones within SLUICE_DEAD_RETENTION) are counted, the " +
		"other seeded tenant's rows compared with the seed, and VACUUM of events, deliveries and delivery_attempts " +
		"makes the deleted rows' space free. Targets: the old rows out of every read at once and gone from the " +
		"tables, the other tenant's rows all there, in every run; the deletion within an hour; healthy p99 " +
		"during ≤ 1.2 × before.",
	Run:        tenantRetention,
	MinTimeout: 6 * time.Minute,
}

const (
	trDays      = 3
	trEndpoints = 4
	trDuring    = 30 * time.Second // the longest the load goes on after the PATCH
)

func tenantRetention(ctx context.Context, env *Env) (Table, error) {
	events := env.size(200000, 20000)
	rate := float64(env.size(1000, 500))
	metrics := []Metric{
		{Name: "old rows out of every read at once (1 = yes)", Unit: "", Target: 1, Worst: true},
		{Name: "old rows gone from the tables (1 = yes)", Unit: "", Target: 1, Worst: true},
		{Name: "other tenant's rows all there (1 = yes)", Unit: "", Target: 1, Worst: true},
		{Name: "deletion, wall time", Unit: "s", Target: 3600, AtMost: true},
		{Name: "healthy p99, during ÷ before", Unit: "×", Target: 1.2, AtMost: true},
		{Name: "deletion, statements", Unit: ""},
		{Name: "deletion, longest statement", Unit: "ms"},
		{Name: "deliveries deleted", Unit: ""},
		{Name: "events deleted", Unit: ""},
		{Name: "PATCH, then the reads checked", Unit: "ms"},
		{Name: "healthy p50, before", Unit: "ms"},
		{Name: "healthy p99, before", Unit: "ms"},
		{Name: "healthy max, before", Unit: "ms"},
		{Name: "healthy p50, during", Unit: "ms"},
		{Name: "healthy p99, during", Unit: "ms"},
		{Name: "healthy max, during", Unit: "ms"},
		{Name: "delivered", Unit: "deliveries/s"},
		{Name: "seeding (inserts)", Unit: "s"},
		{Name: "VACUUM after the deletion", Unit: "s"},
	}
	receivers := newReceivers(retentionHealthy)
	defer receivers.Close()
	var t Table
	pool, err := pgxpool.New(ctx, env.DB.Config().ConnString())
	if err != nil {
		return t, fmt.Errorf("open a pool for the deletion: %w", err)
	}
	defer pool.Close()
	st := store.New(pool, nil)
	if _, err := awaitRetentionJob(ctx, env); err != nil {
		return t, err
	}
	rt, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		s.Note = "load average " + loadAverage()
		short, long, err := seedTenantRetention(ctx, env, run, events, s.Values)
		if err != nil {
			return s, err
		}
		w, err := loadAroundTenantExpiry(ctx, env, st, receivers, run, rate, short)
		s.Note = joinNotes(s.Note, w.note)
		if err != nil {
			return s, err
		}
		s.CPU = w.cpu
		w.values(s.Values)
		left, err := tenantRowsPastRetention(ctx, env, short.id, w.bound)
		if err != nil {
			return s, err
		}
		s.Values["old rows gone from the tables (1 = yes)"] = yes(left == 0)
		if left > 0 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("**%d rows of the tenant past its day and not kept are still in the tables**", left))
		}
		now, err := tenantRowCount(ctx, env, long.id)
		if err != nil {
			return s, err
		}
		s.Values["other tenant's rows all there (1 = yes)"] = yes(now == long.rows)
		if now != long.rows {
			s.Note = joinNotes(s.Note, fmt.Sprintf("**the other tenant holds %d rows, seeded %d**", now, long.rows))
		}
		t0 := time.Now()
		if _, err := env.DB.Exec(ctx, `VACUUM events, deliveries, delivery_attempts`); err != nil {
			return s, fmt.Errorf("vacuum after the deletion: %w", err)
		}
		s.Values["VACUUM after the deletion"] = time.Since(t0).Seconds()
		s.Note = joinNotes(s.Note, "load average after "+loadAverage())
		return s, nil
	})
	rt.Notes = append(t.Notes, rt.Notes...)
	rt.Notes = append(rt.Notes, fmt.Sprintf("per run: 2 tenants × %d events (%d deliveries each) over the %d days before now; "+
		"%d healthy endpoints of the benchmark tenant at %.0f events/s", events, events*searchFanOut, trDays, retentionHealthy, rate))
	return rt, err
}

func yes(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// seededTenant is a tenant the scenario made and seeded.
type seededTenant struct {
	id   string
	api  *Client
	rows int // events + deliveries + attempts
}

// seedTenantRetention makes and seeds the run's two tenants alike.
func seedTenantRetention(ctx context.Context, env *Env, run, events int, v map[string]float64) (short, long seededTenant, err error) {
	w := searchWindow{from: time.Now().Add(-trDays * 24 * time.Hour), to: time.Now().Add(-time.Hour)}
	for week := store.PartitionWeek(w.from); !week.After(w.to); week = week.AddDate(0, 0, 7) {
		if _, err := env.DB.Exec(ctx, `/* bench-retention-tenant */ SELECT sluice_ensure_week($1::timestamptz)`, week); err != nil {
			return short, long, fmt.Errorf("sluice_ensure_week(%s): %w", week.Format(time.DateOnly), err)
		}
	}
	t0 := time.Now()
	for i, t := range []*seededTenant{&short, &long} {
		if t.api, err = snTenant(ctx, env, fmt.Sprintf("retention-tenant-r%d-%d", run, i), ""); err != nil {
			return short, long, err
		}
		eps := make([]string, trEndpoints)
		for k := range eps {
			if eps[k], err = t.api.CreateEndpoint(ctx, fmt.Sprintf("http://127.0.0.1:9/retention-tenant/%d/%d", i, k), 10); err != nil {
				return short, long, fmt.Errorf("create a seeded tenant's endpoint: %w", err)
			}
		}
		if t.id, err = endpointTenant(ctx, env, eps[0]); err != nil {
			return short, long, err
		}
		for first := 1; first <= events; first += searchChunk {
			if err := seedSearchChunk(ctx, env.DB, t.id, eps, w, events, first, min(first+searchChunk-1, events)); err != nil {
				return short, long, fmt.Errorf("seed tenant %d: %w", i, err)
			}
		}
		if t.rows, err = tenantRowCount(ctx, env, t.id); err != nil {
			return short, long, err
		}
	}
	v["seeding (inserts)"] = time.Since(t0).Seconds()
	if _, err := env.DB.Exec(ctx, `VACUUM (ANALYZE) events, deliveries, delivery_attempts`); err != nil {
		return short, long, fmt.Errorf("vacuum the seeded rows: %w", err)
	}
	return short, long, nil
}

// tenantRowCount is the tenant's events, deliveries and attempts.
func tenantRowCount(ctx context.Context, env *Env, tenant string) (int, error) {
	var n int
	err := env.DB.QueryRow(ctx, `/* bench-retention-tenant */
		SELECT (SELECT count(*) FROM events WHERE tenant_id = $1) +
		       (SELECT count(*) FROM deliveries WHERE tenant_id = $1) +
		       (SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.tenant_id = $1)`,
		tenant).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the tenant's rows: %w", err)
	}
	return n, nil
}

// tenantRowsPastRetention counts the tenant's deliveries before bound
// that retention does not keep (all but dead ones), and its events before
// bound that no kept delivery needs.
func tenantRowsPastRetention(ctx context.Context, env *Env, tenant string, bound uuid.UUID) (int, error) {
	var n int
	err := env.DB.QueryRow(ctx, `/* bench-retention-tenant */
		SELECT (SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND id < $2 AND status <> 'dead') +
		       (SELECT count(*) FROM events e WHERE tenant_id = $1 AND id < $2
		          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.status = 'dead'))`,
		tenant, bound).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the tenant's rows past its retention: %w", err)
	}
	return n, nil
}

// aroundExpiry is the healthy load of one run, with the PATCH and the
// deletion in its middle.
type aroundExpiry struct {
	before, during    window
	rate              float64
	cpu               cpuUse
	hidden            bool
	checked           time.Duration // PATCH → the reads checked
	statements        int
	longest, deletion time.Duration
	deliveries, evs   int
	bound             uuid.UUID
	note              string
}

func (w aroundExpiry) values(v map[string]float64) {
	v["old rows out of every read at once (1 = yes)"] = yes(w.hidden)
	v["deletion, wall time"] = w.deletion.Seconds()
	v["deletion, statements"] = float64(w.statements)
	v["deletion, longest statement"] = ms(w.longest)
	v["deliveries deleted"] = float64(w.deliveries)
	v["events deleted"] = float64(w.evs)
	v["PATCH, then the reads checked"] = ms(w.checked)
	v["healthy p50, before"], v["healthy p99, before"], v["healthy max, before"] = w.before.p50, w.before.p99, w.before.max
	v["healthy p50, during"], v["healthy p99, during"], v["healthy max, during"] = w.during.p50, w.during.p99, w.during.max
	if w.before.p99 > 0 {
		v["healthy p99, during ÷ before"] = w.during.p99 / w.before.p99
	}
	v["delivered"] = w.rate
}

// loadAroundTenantExpiry offers the healthy load, sets short's retention
// to a day retentionWarm + retentionWindow in, checks its reads, deletes
// what is past the day, and stops the load when that is done.
func loadAroundTenantExpiry(ctx context.Context, env *Env, st *store.Store, receivers Receivers, run int, rate float64, short seededTenant) (w aroundExpiry, err error) {
	sinks, err := newSinks(ctx, env.API, receivers, 100, func(i int) string {
		return fmt.Sprintf("bench.retention-tenant.r%d.%d", run, i)
	})
	if err != nil {
		return w, fmt.Errorf("set up healthy endpoints: %w", err)
	}
	defer func() { w.note = joinNotes(w.note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()
	oldEvent, oldDelivery, err := oldDelivered(ctx, env, short.id)
	if err != nil {
		return w, err
	}
	until := url.QueryEscape(time.Now().Add(-25 * time.Hour).UTC().Format(time.RFC3339))
	reads := func(want int) error {
		var page struct {
			Data []struct{} `json:"data"`
		}
		if err := short.api.do(ctx, http.MethodGet, "/v1/deliveries?status=delivered&limit=10&until="+until, nil, http.StatusOK, &page); err != nil {
			return err
		}
		if (len(page.Data) > 0) != (want == http.StatusOK) {
			return fmt.Errorf("GET /v1/deliveries?status=delivered&until=%s: %d items", until, len(page.Data))
		}
		if err := short.api.do(ctx, http.MethodGet, "/v1/events/"+oldEvent, nil, want, nil); err != nil {
			return err
		}
		return short.api.do(ctx, http.MethodGet, "/v1/deliveries/"+oldDelivery, nil, want, nil)
	}
	if err := reads(http.StatusOK); err != nil {
		return w, fmt.Errorf("the old rows before the PATCH: %w", err)
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	cpu := env.measureCPU()
	start := time.Now()
	done := inBackground(func() (int, int, error) {
		// offerLoad's batches, but stopped by loadCtx between them: a
		// batch in flight when the deletion ends is answered.
		return offer(loadCtx, rate, retentionWarm+retentionWindow+trDuring, 64, 1000,
			postBatch(ctx, env.API, sinks.Types))
	})
	split := start.Add(retentionWarm + retentionWindow)
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(split)):
	}
	patched := time.Now()
	if err := short.api.do(ctx, http.MethodPatch, "/v1/tenant", map[string]any{"retention": "24h"}, http.StatusOK, nil); err != nil {
		stopLoad()
		<-done
		return w, fmt.Errorf("set the tenant's retention: %w", err)
	}
	herr := reads(http.StatusNotFound)
	w.hidden, w.checked = herr == nil, time.Since(patched)
	if herr != nil {
		w.note = joinNotes(w.note, "**old rows still read after the PATCH: "+herr.Error()+"**")
	}
	eerr := w.expire(ctx, st, short.id)
	stopLoad()
	o := <-done
	if eerr != nil {
		return w, eerr
	}
	if o.err != nil {
		return w, fmt.Errorf("healthy load: %w", o.err)
	}
	if w.deletion > trDuring-time.Second {
		w.note = joinNotes(w.note, fmt.Sprintf("the deletion (%s) outlasted the load", w.deletion.Round(time.Millisecond)))
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
	w.rate = float64(arr.Unique) / arr.Last.Sub(start).Seconds()
	w.before = latencyWindow(arr.First, start.Add(retentionWarm), split)
	w.during = latencyWindow(arr.First, split, patched.Add(w.checked+w.deletion))
	if o := w.cpu.others(); o > 0.1 {
		w.note = joinNotes(w.note, fmt.Sprintf("other processes used %.2f cores", o))
	}
	return w, nil
}

// expire deletes what of tenant is past a day with the retention job's
// maintenance.ExpireTenant, paced as the job paces it, timing each
// statement.
func (w *aroundExpiry) expire(ctx context.Context, st *store.Store, tenant string) error {
	day := int64(24 * time.Hour / time.Second)
	t := dbq.TenantRetention{TenantID: uuid.MustParse(tenant), RetentionSeconds: &day}
	w.bound = maintenance.TenantExpiryBound(t, time.Now())
	t0 := time.Now()
	defer func() { w.deletion = time.Since(t0) }()
	observe := func(_ string, _ int, took time.Duration) {
		w.statements++
		w.longest = max(w.longest, took)
	}
	var err error
	w.deliveries, w.evs, err = maintenance.ExpireTenant(ctx, st, t, time.Now(), maintenance.TenantChunk,
		maintenance.ExpirePace{Clock: jobs.SystemClock, Observe: observe})
	if err != nil {
		return fmt.Errorf("delete the tenant's rows past a day: %w", err)
	}
	return nil
}

// oldDelivered is an event of the tenant older than two days all of whose
// deliveries were delivered, and one of them.
func oldDelivered(ctx context.Context, env *Env, tenant string) (event, delivery string, err error) {
	err = env.DB.QueryRow(ctx, `/* bench-retention-tenant */
		SELECT e.id::text, (SELECT d.id::text FROM deliveries d WHERE d.event_id = e.id LIMIT 1)
		FROM events e
		WHERE e.tenant_id = $1 AND e.created_at < now() - interval '2 days'
		  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.status <> 'delivered')
		LIMIT 1`, tenant).Scan(&event, &delivery)
	if err != nil {
		return "", "", fmt.Errorf("find an old delivered event: %w", err)
	}
	return event, delivery, nil
}
