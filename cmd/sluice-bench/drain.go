package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Drain: 10,000 endpoints with 100 queued deliveries each, seeded
// set-based in SQL, draining; and the same seeding on 100 endpoints, to
// compare what each delivery costs the database.

var drainScenario = Scenario{
	Name:  "drain-10k",
	Title: "10,000 endpoints with 1,000,000 queued deliveries draining",
	What: "10,000 endpoints (max_in_flight 100) are created once through the API (16 parallel clients), each at a " +
		"path of its own on one of 100 loopback receivers that only count requests and answer 200. Each run seeds, " +
		"in one SQL statement on the benchmark's connection (as internal/store/claim_plan_test.go does), 1,000,000 " +
		"events and one due delivery per event, event i on endpoint i mod 10,000 (100 each), with no dispatch job: " +
		"Sluice's sweeper finds them (at most 1,000 endpoints per sweep, one sweep a second) as it would after an " +
		"outage. pg_stat_statements is reset just after the seed commits; deliveries/s = deliveries ÷ (commit → " +
		"last request received, once none of them is queued). Database time per delivery = Σ total_exec_time of " +
		"pg_stat_statements over Sluice's statements in that drain (the benchmark's own excluded; planning time not " +
		"tracked) ÷ deliveries. The same is measured, in the same run and first, for 100 of those endpoints with " +
		"10,000 deliveries each (the same 1,000,000, so that the tables and indexes the drain works through are " +
		"the same size), the baseline: target database time per delivery at 10,000 endpoints no " +
		"higher than at 100. With -quick: 1,000 endpoints × 100 (100,000) against 100 × 1,000. Needs Postgres with " +
		"pg_stat_statements loaded (SLUICE_PG_EXTRA_CONF=\"shared_preload_libraries = 'pg_stat_statements'\" make " +
		"bench …); without it only the rates and CPU are reported.",
	Run:        drain,
	MinTimeout: 12 * time.Minute,
}

const (
	drainReceivers   = 100
	drainMaxInFlight = 100
	drainNarrow      = 100 // endpoints of the baseline drain
)

// countingReceiver is a loopback receiver that answers 200 and only counts:
// a million requests kept with their bodies would cost the benchmark
// gigabytes and much of a core.
type countingReceiver struct {
	srv  *httptest.Server
	n    atomic.Int64
	last atomic.Int64 // unix nanos of the latest request
}

func newCountingReceiver() *countingReceiver {
	c := &countingReceiver{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		c.last.Store(time.Now().UnixNano())
		w.WriteHeader(http.StatusOK)
	}))
	return c
}

type countingReceivers []*countingReceiver

func (cs countingReceivers) count() int {
	n := 0
	for _, c := range cs {
		n += int(c.n.Load())
	}
	return n
}

func (cs countingReceivers) last() time.Time {
	var t int64
	for _, c := range cs {
		t = max(t, c.last.Load())
	}
	return time.Unix(0, t)
}

func (cs countingReceivers) close() {
	for _, c := range cs {
		c.srv.CloseClientConnections()
		c.srv.Close()
	}
}

func drain(ctx context.Context, env *Env) (Table, error) {
	nWide, perWide := env.size(10000, 1000), 100
	perNarrow := nWide * perWide / drainNarrow // the same deliveries over 100 endpoints
	wide := fmt.Sprintf("%d endpoints", nWide)
	narrow := fmt.Sprintf("%d endpoints", drainNarrow)
	metrics := []Metric{
		{Name: "drain, " + wide, Unit: "deliveries/s", Target: 5000},
		{Name: "DB time per delivery, " + wide + " ÷ " + narrow, Unit: "×", Target: 1, AtMost: true},
		{Name: "drain, " + narrow, Unit: "deliveries/s"},
		{Name: "DB time per delivery, " + wide, Unit: "ms"},
		{Name: "DB time per delivery, " + narrow, Unit: "ms"},
		{Name: "statements per delivery, " + wide, Unit: ""},
		{Name: "statements per delivery, " + narrow, Unit: ""},
		{Name: "Postgres CPU per delivery, " + wide, Unit: "ms"},
		{Name: "Postgres CPU per delivery, " + narrow, Unit: "ms"},
		{Name: "Sluice CPU per delivery, " + wide, Unit: "ms"},
		{Name: "Sluice CPU per delivery, " + narrow, Unit: "ms"},
		{Name: "first delivery after commit, " + wide, Unit: "s"},
		{Name: fmt.Sprintf("seeding %d deliveries", nWide*perWide), Unit: "s"},
	}
	var t Table
	recv := make(countingReceivers, drainReceivers)
	for i := range recv {
		recv[i] = newCountingReceiver()
	}
	defer recv.close()

	setupCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	t0 := time.Now()
	ids := make([]string, nWide)
	err := parallel(nWide, 16, func(i int) error {
		id, err := env.API.CreateEndpoint(setupCtx, fmt.Sprintf("%s/d%d", recv[i%len(recv)].srv.URL, i), drainMaxInFlight)
		ids[i] = id
		return err
	})
	cancel()
	if err != nil {
		return t, fmt.Errorf("create %d endpoints: %w", nWide, err)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d endpoints created through the API in %s", nWide, time.Since(t0).Round(100*time.Millisecond)))
	tenant, err := endpointTenant(ctx, env, ids[0])
	if err != nil {
		return t, err
	}
	pgss, note := pgssReady(ctx, env)
	if note != "" {
		t.Notes = append(t.Notes, note+": no database time measured")
	}

	var tops [2]string
	rt, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		for k, c := range []struct {
			label string
			eps   []string
			per   int
		}{{narrow, ids[:drainNarrow], perNarrow}, {wide, ids, perWide}} {
			d, err := drainOnce(ctx, env, recv, seed{tenant: tenant, typ: fmt.Sprintf("bench.drain.r%d.%d", run, len(c.eps)), eps: c.eps, per: c.per}, pgss)
			s.Note = joinNotes(s.Note, d.note)
			if err != nil {
				return s, fmt.Errorf("%s: %w", c.label, err)
			}
			s.Values["drain, "+c.label] = d.rate
			s.Values["Postgres CPU per delivery, "+c.label] = 1000 * float64(d.cpu.postgres) / clockTick / float64(d.delivered)
			s.Values["Sluice CPU per delivery, "+c.label] = 1000 * float64(d.cpu.sluice) / clockTick / float64(d.delivered)
			if pgss {
				s.Values["DB time per delivery, "+c.label] = d.dbMS / float64(d.delivered)
				s.Values["statements per delivery, "+c.label] = float64(d.calls) / float64(d.delivered)
				tops[k] = fmt.Sprintf("run %d, %s: %s", run, c.label, d.top)
			}
			if c.label == wide {
				s.Values[fmt.Sprintf("seeding %d deliveries", nWide*perWide)] = d.seed.Seconds()
				s.Values["first delivery after commit, "+c.label] = d.first.Seconds()
				s.CPU = d.cpu
			}
			s.TimedOut = s.TimedOut || d.timedOut
			if d.cpu.others() > 0.1 {
				s.Note = joinNotes(s.Note, fmt.Sprintf("%s: other processes used %.2f cores", c.label, d.cpu.others()))
			}
		}
		if n, w := s.Values["DB time per delivery, "+narrow], s.Values["DB time per delivery, "+wide]; n > 0 && w > 0 {
			s.Values["DB time per delivery, "+wide+" ÷ "+narrow] = w / n
		}
		return s, nil
	})
	rt.Notes = append(t.Notes, rt.Notes...)
	rt.Notes = append(rt.Notes, fmt.Sprintf("per run: %d × %d deliveries (baseline), then %d × %d; the endpoints stay (enabled, "+
		"nothing queued) after the scenario", drainNarrow, perNarrow, nWide, perWide))
	for _, top := range tops {
		if top != "" {
			rt.Notes = append(rt.Notes, "Sluice's statements by database time (pg_stat_statements), "+top)
		}
	}
	return rt, err
}

// endpointTenant is the id of the tenant that owns endpoint id.
func endpointTenant(ctx context.Context, env *Env, id string) (string, error) {
	var tenant string
	if err := env.DB.QueryRow(ctx, `SELECT tenant_id::text FROM endpoints WHERE id = $1`, id).Scan(&tenant); err != nil {
		return "", fmt.Errorf("read the tenant: %w", err)
	}
	return tenant, nil
}

// drained is what one drain measured.
type drained struct {
	delivered int
	seed      time.Duration // the seeding statement
	first     time.Duration // commit → first request
	rate      float64       // deliveries/s, commit → last request
	cpu       cpuUse        // commit → last request
	dbMS      float64       // Σ total_exec_time of Sluice's statements
	calls     int64
	top       string
	timedOut  bool
	note      string
}

// seed is what drainOnce queues: per due deliveries on each of eps, each
// of an event of its own of type typ, whose id is eventID (SQL of g, the
// event's number; default now's sluice_uuidv7()).
type seed struct {
	tenant, typ string
	eps         []string
	per         int
	eventID     string
	afterSeed   func(context.Context) error // run once the seed has committed, before the drain is measured
}

// drainOnce seeds the deliveries of s and waits until they have all been
// delivered.
func drainOnce(ctx context.Context, env *Env, recv countingReceivers, s seed, pgss bool) (d drained, err error) {
	typ, want := s.typ, len(s.eps)*s.per
	if s.eventID == "" {
		s.eventID = "sluice_uuidv7()"
	}
	t0 := time.Now()
	_, err = env.DB.Exec(ctx, `/* bench-drain */
		WITH ev AS (
			INSERT INTO events (id, tenant_id, type, payload)
			SELECT `+s.eventID+`, $1, $2, json_build_object('seq', g, 'note', repeat('x', 160))
			FROM generate_series(1, $3::int) g
			RETURNING id),
		n AS (SELECT id, row_number() OVER () AS rn FROM ev)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at)
		SELECT sluice_uuidv7(), $1, n.id, ($4::uuid[])[1 + n.rn % cardinality($4::uuid[])], $2, now() FROM n`,
		s.tenant, typ, want, s.eps)
	if err != nil {
		return d, fmt.Errorf("seed %d deliveries: %w", want, err)
	}
	d.seed = time.Since(t0)
	if s.afterSeed != nil {
		if err := s.afterSeed(ctx); err != nil {
			return d, err
		}
	}
	if pgss {
		if _, err := env.DB.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
			return d, fmt.Errorf("reset pg_stat_statements: %w", err)
		}
	}
	base := recv.count()
	start := time.Now()
	stop := env.measureCPU()

	for recv.count()-base < want && ctx.Err() == nil {
		if d.first == 0 && recv.count() > base {
			d.first = time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every request counted; make sure none is a duplicate that left a
	// delivery queued.
	for ctx.Err() == nil {
		var queued int
		if err := env.DB.QueryRow(ctx, `/* bench-drain */ SELECT count(*) FROM deliveries
			WHERE event_type = $1 AND status IN ('pending', 'failed')`, typ).Scan(&queued); err != nil {
			return d, fmt.Errorf("count queued deliveries: %w", err)
		}
		if queued == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.cpu = stop()
	got := recv.count() - base
	end := recv.last()
	if got < want || ctx.Err() != nil {
		d.timedOut, end = true, time.Now()
		d.note = fmt.Sprintf("%s: stopped after %s with %d of %d requests received", typ, end.Sub(start).Round(time.Millisecond), got, want)
	}
	if got > want {
		d.note = joinNotes(d.note, fmt.Sprintf("%s: %d requests for %d deliveries", typ, got, want))
	}
	d.delivered = min(got, want)
	if d.delivered == 0 {
		return d, fmt.Errorf("nothing delivered of %d", want)
	}
	d.rate = float64(d.delivered) / end.Sub(start).Seconds()
	if pgss {
		d.dbMS, d.calls, d.top, err = statementTime(ctx, env.DB, float64(d.delivered), "delivery")
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// pgssReady makes sure pg_stat_statements can be read in the benchmark's
// database; when it cannot, it returns false and why.
func pgssReady(ctx context.Context, env *Env) (bool, string) {
	if _, err := env.DB.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return false, "pg_stat_statements is not available (" + err.Error() + ")"
	}
	if _, err := env.DB.Exec(ctx, `SELECT 1 FROM pg_stat_statements LIMIT 1`); err != nil {
		return false, "pg_stat_statements is not loaded by this Postgres (" + err.Error() + "); run with " +
			"SLUICE_PG_EXTRA_CONF=\"shared_preload_libraries = 'pg_stat_statements'\""
	}
	return true, ""
}

// statementTime sums pg_stat_statements over this database's statements,
// the benchmark's own aside, and describes the six that took longest, per
// unit (per is how many units: deliveries, seconds).
func statementTime(ctx context.Context, db *pgx.Conn, per float64, unit string) (ms float64, calls int64, top string, err error) {
	rows, err := db.Query(ctx, `/* bench-drain */
		SELECT query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%bench-drain%' AND query NOT ILIKE '%pg_stat_%'
		ORDER BY total_exec_time DESC`)
	if err != nil {
		return 0, 0, "", fmt.Errorf("read pg_stat_statements: %w", err)
	}
	type stmt struct {
		query string
		calls int64
		ms    float64
	}
	stmts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stmt, error) {
		var s stmt
		err := r.Scan(&s.query, &s.calls, &s.ms)
		if err != nil {
			return s, fmt.Errorf("scan a statement: %w", err)
		}
		return s, nil
	})
	if err != nil {
		return 0, 0, "", fmt.Errorf("read pg_stat_statements: %w", err)
	}
	var parts []string
	for i, s := range stmts {
		ms += s.ms
		calls += s.calls
		if i < 6 {
			parts = append(parts, fmt.Sprintf("`%s` %.3f ms/%s (%.2f calls/%s, %.2f ms each)",
				shortSQL(s.query), s.ms/per, unit, float64(s.calls)/per, unit, s.ms/float64(max(s.calls, 1))))
		}
	}
	// The most frequent, which a statement added per delivery joins.
	slices.SortFunc(stmts, func(a, b stmt) int { return cmp.Compare(b.calls, a.calls) })
	var often []string
	for _, s := range stmts[:min(len(stmts), 12)] {
		often = append(often, fmt.Sprintf("`%s` %.2f", shortSQL(s.query), float64(s.calls)/per))
	}
	return ms, calls, fmt.Sprintf("total %.3f ms/%s, %.2f statements/%s, %d distinct; top: %s; most called (calls/%s): %s",
		ms/per, unit, float64(calls)/per, unit, len(stmts), strings.Join(parts, "; "), unit, strings.Join(often, "; ")), nil
}

var spaces = regexp.MustCompile(`\s+`)

// shortSQL names a statement: sqlc's name, or its text on one line cut
// to 110 characters.
func shortSQL(q string) string {
	q = strings.TrimSpace(spaces.ReplaceAllString(q, " "))
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	q = strings.ReplaceAll(q, "`", "'")
	if r := []rune(q); len(r) > 110 {
		q = string(r[:110]) + "…"
	}
	return q
}
