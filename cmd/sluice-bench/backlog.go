package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backlog: one endpoint's claim over a queue of 100,000 against a short
// one, in week partitions Postgres has no statistics for.

var backlogScenario = Scenario{
	Name:  "backlog-100k",
	Title: "A 100,000-delivery backlog on one endpoint, without statistics",
	What: "One endpoint (max_in_flight 100) on a loopback receiver that only counts. The deliveries go into last " +
		"week's partitions, which the benchmark made empty at its start and nothing has written since; autovacuum " +
		"is turned off for them, so Postgres never gathers statistics for them (the notes show that none were). " +
		"Each run seeds there, in one SQL statement (as drain-10k does), first 5,000 due deliveries, the short " +
		"queue, then 100,000, the backlog, each drained before the next is seeded; before each run, a VACUUM " +
		"(without ANALYZE) of those partitions does what autovacuum would have done since the run before. (Older weeks would be dropped " +
		"by Sluice's retention job as past SLUICE_RETENTION, queued deliveries moved, mid-run.) Right after the backlog's seed, " +
		"the claim's generic plan (the one group-committed claims run) is shown with EXPLAIN (ANALYZE, BUFFERS) " +
		"for a claim of 100 from the front of the queue (as a run's first claim; later ones start after the last full claim). Claim time = pg_stat_statements' mean execution time of ClaimDueDeliveries during " +
		"each drain; throughput = deliveries ÷ (first request → last request), so the sweeper's pick-up (up to " +
		"a second) is not counted. Targets: with the backlog, claim time at most 1.2× and throughput at least " +
		"0.8× those with the short queue. Runs last, so its old partitions add nothing to the scenarios before it.",
	Run:        backlog,
	MinTimeout: 3 * time.Minute,
}

const (
	backlogShort = 5000
	backlogLong  = 100000
)

func backlog(ctx context.Context, env *Env) (Table, error) {
	long, short := env.size(backlogLong, 20000), env.size(backlogShort, 2000)
	longQ, shortQ := fmt.Sprintf("%d queued", long), fmt.Sprintf("%d queued", short)
	metrics := []Metric{
		{Name: "claim time, " + longQ + " ÷ " + shortQ, Unit: "×", Target: 1.2, AtMost: true},
		{Name: "throughput, " + longQ + " ÷ " + shortQ, Unit: "×", Target: 0.8},
		{Name: "claim time, " + longQ, Unit: "ms"},
		{Name: "claim time, " + shortQ, Unit: "ms"},
		{Name: "throughput, " + longQ, Unit: "deliveries/s"},
		{Name: "throughput, " + shortQ, Unit: "deliveries/s"},
	}
	var t Table
	pgss, note := pgssReady(ctx, env)
	if !pgss {
		t.Notes = append(t.Notes, note+": no claim times measured")
	}
	recv := countingReceivers{newCountingReceiver()}
	defer recv.close()
	ep, err := env.API.CreateEndpoint(ctx, recv[0].srv.URL+"/backlog", drainMaxInFlight)
	if err != nil {
		return t, fmt.Errorf("create the endpoint: %w", err)
	}
	tenant, err := endpointTenant(ctx, env, ep)
	if err != nil {
		return t, err
	}
	week := "(extract(epoch FROM now() - interval '7 days') * 1000)::bigint"
	part, err := quietWeek(ctx, env.DB, week)
	if err != nil {
		return t, err
	}
	var plan string
	rt, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		// What autovacuum would have done since the run before: clear the
		// index entries of delivered rows (VACUUM without ANALYZE gathers
		// no statistics).
		if _, err := env.DB.Exec(ctx, `/* bench-drain */ VACUUM `+part+`, events`+strings.TrimPrefix(part, "deliveries")); err != nil {
			return s, fmt.Errorf("vacuum: %w", err)
		}
		for _, q := range []struct {
			label string
			n     int
		}{{shortQ, short}, {longQ, long}} {
			sd := seed{tenant: tenant, typ: fmt.Sprintf("bench.backlog.r%d.%d", run, q.n), eps: []string{ep}, per: q.n,
				eventID: uuidv7At(week + " + g")}
			if q.n == long && run == 1 {
				sd.afterSeed = func(ctx context.Context) (err error) {
					plan, err = explainClaim(ctx, env.DB, ep)
					return err
				}
			}
			d, err := drainOnce(ctx, env, recv, sd, pgss)
			s.Note = joinNotes(s.Note, d.note)
			if err != nil {
				return s, fmt.Errorf("%s: %w", q.label, err)
			}
			s.TimedOut = s.TimedOut || d.timedOut
			s.Values["throughput, "+q.label] = float64(d.delivered) / (float64(d.delivered)/d.rate - d.first.Seconds())
			if pgss {
				if s.Values["claim time, "+q.label], err = meanTime(ctx, env.DB, "ClaimDueDeliveries"); err != nil {
					return s, err
				}
			}
		}
		if l, sh := s.Values["claim time, "+longQ], s.Values["claim time, "+shortQ]; l > 0 && sh > 0 {
			s.Values["claim time, "+longQ+" ÷ "+shortQ] = l / sh
		}
		s.Values["throughput, "+longQ+" ÷ "+shortQ] = s.Values["throughput, "+longQ] / s.Values["throughput, "+shortQ]
		return s, nil
	})
	if plan != "" {
		rt.Notes = append(rt.Notes, "the claim of 100 right after run 1's backlog was seeded, generic plan:\n\n  ```text\n  "+
			strings.ReplaceAll(plan, "\n", "\n  ")+"\n  ```\n")
	}
	rt.Notes = append(t.Notes, rt.Notes...)
	rt.Notes = append(rt.Notes, statsNote(ctx, env.DB, part))
	if err := autovacuum(ctx, env.DB, strings.TrimPrefix(part, "deliveries_"), "RESET (autovacuum_enabled)"); err != nil {
		rt.Notes = append(rt.Notes, err.Error())
	}
	return rt, err
}

// quietWeek makes the partitions of the week holding the Unix millisecond
// msExpr, if missing, and turns autovacuum off for them (until the
// scenario's end), so nothing gathers statistics for them during the
// scenario. It returns the deliveries partition's name.
func quietWeek(ctx context.Context, db *pgx.Conn, msExpr string) (string, error) {
	var suffix string
	err := db.QueryRow(ctx, `/* bench-drain */ SELECT to_char(to_timestamp(sluice_week_start_ms(`+msExpr+`) / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD')`).Scan(&suffix)
	if err != nil {
		return "", fmt.Errorf("name the week: %w", err)
	}
	if _, err := db.Exec(ctx, `/* bench-drain */ SELECT sluice_ensure_week(to_timestamp(`+msExpr+` / 1000.0))`); err != nil {
		return "", fmt.Errorf("make the week's partitions: %w", err)
	}
	return "deliveries_" + suffix, autovacuum(ctx, db, suffix, "SET (autovacuum_enabled = off)")
}

// autovacuum alters the autovacuum setting of a week's three partitions.
func autovacuum(ctx context.Context, db *pgx.Conn, suffix, set string) error {
	for _, table := range []string{"events", "deliveries", "delivery_attempts"} {
		if _, err := db.Exec(ctx, `/* bench-drain */ ALTER TABLE `+table+"_"+suffix+" "+set); err != nil {
			return fmt.Errorf("autovacuum of %s_%s: %w", table, suffix, err)
		}
	}
	return nil
}

// statsNote says whether Postgres ever gathered statistics for table.
func statsNote(ctx context.Context, db *pgx.Conn, table string) string {
	var analyzed bool
	var reltuples float64
	err := db.QueryRow(ctx, `/* bench-drain */ SELECT coalesce(s.last_analyze, s.last_autoanalyze) IS NOT NULL, c.reltuples
		FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = $1`, table).Scan(&analyzed, &reltuples)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: could not read its statistics (%v)", table, err)
	case analyzed:
		return fmt.Sprintf("%s: **analyzed** during the scenario (reltuples %.0f)", table, reltuples)
	}
	return fmt.Sprintf("%s: never analyzed by the end (no last_analyze or last_autoanalyze; reltuples %.0f)", table, reltuples)
}

// explainClaim shows the claim of 100 of ep's deliveries as the claimer
// runs it: its generic plan, with EXPLAIN (ANALYZE, BUFFERS).
func explainClaim(ctx context.Context, db *pgx.Conn, ep string) (string, error) {
	sql, err := claimSQL()
	if err != nil {
		return "", err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("begin the claim's explain: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE bench_claim AS " + sql} {
		if _, err := tx.Exec(ctx, "/* bench-drain */ "+stmt); err != nil {
			return "", fmt.Errorf("explain the claim: %w", err)
		}
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("/* bench-drain */ EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim('{%s}', '{100}', '{-infinity}', '{00000000-0000-0000-0000-000000000000}')", ep))
	if err != nil {
		return "", fmt.Errorf("explain the claim: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("explain the claim: %w", err)
	}
	if _, err := tx.Exec(ctx, "DEALLOCATE bench_claim"); err != nil {
		return "", fmt.Errorf("deallocate the claim: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// claimSQL reads ClaimDueDeliveries from queries/dispatch.sql (the bench
// runs from the repository's root), its parameters numbered.
func claimSQL() (string, error) {
	raw, err := os.ReadFile("queries/dispatch.sql")
	if err != nil {
		return "", fmt.Errorf("read the claim's SQL: %w", err)
	}
	_, rest, ok := strings.Cut(string(raw), "-- name: ClaimDueDeliveries :many\n")
	if !ok {
		return "", errors.New("queries/dispatch.sql has no ClaimDueDeliveries")
	}
	q, _, _ := strings.Cut(rest, ";")
	return strings.NewReplacer("@endpoint_ids", "$1", "@max_rows", "$2", "@after_ats", "$3", "@after_ids", "$4").Replace(q), nil
}

// meanTime is pg_stat_statements' mean execution time, in ms, of the sqlc
// query named name in this database since the last reset.
func meanTime(ctx context.Context, db *pgx.Conn, name string) (float64, error) {
	var ms float64
	err := db.QueryRow(ctx, `/* bench-drain */
		SELECT coalesce(sum(total_exec_time) / nullif(sum(calls), 0), 0) FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query LIKE '-- name: ' || $1 || ' %'`, name).Scan(&ms)
	if err != nil {
		return 0, fmt.Errorf("read %s's time: %w", name, err)
	}
	return ms, nil
}
