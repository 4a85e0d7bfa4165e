package main

import (
	"context"
	"time"
)

// Waits of the ratelimit-2w scenario, each bounded by its context and a
// time limit of its own.

// awaitQueued waits (at most 30 s) until the endpoints ids have total
// deliveries, and returns when it saw them; false if they never did.
func awaitQueued(ctx context.Context, env *Env, ids []string, total int) (time.Time, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		if err := env.DB.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = ANY($1::uuid[])`, ids).Scan(&n); err != nil {
			return time.Time{}, false
		}
		if n >= total {
			return time.Now(), true
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return time.Time{}, false
}

// awaitCounts waits until receiver i has want[i] requests more than
// base[i], for every i, or ctx ends; it reports whether they all did.
func awaitCounts(ctx context.Context, rs Receivers, base, want []int) bool {
	for {
		done := true
		for i, r := range rs {
			done = done && r.Count()-base[i] >= want[i]
		}
		if done {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
}

// settleCounts waits until the receivers' request count has not changed for
// quiet, for at most limit, so that late duplicates are counted.
func settleCounts(ctx context.Context, rs Receivers, quiet, limit time.Duration) {
	total := func() int {
		n := 0
		for _, r := range rs {
			n += r.Count()
		}
		return n
	}
	deadline := time.Now().Add(limit)
	n, since := total(), time.Now()
	for time.Since(since) < quiet && time.Now().Before(deadline) && ctx.Err() == nil {
		sleepCtx(ctx, 50*time.Millisecond)
		if m := total(); m != n {
			n, since = m, time.Now()
		}
	}
}

// dispatchSpread is how the endpoints' dispatch job runs were spread over
// the worker processes (River clients), read from river_job, where
// completed jobs stay for an hour.
type dispatchSpread struct {
	perClient []int // runs per worker process, most first
	both      int   // endpoints whose runs were in more than one process
	overlaps  int   // pairs of runs of one endpoint that overlapped in time
}

func readDispatchSpread(ctx context.Context, env *Env, ids []string) (d dispatchSpread, err error) {
	const jobs = `SELECT id, args->>'endpoint_id' AS ep, attempted_at, finalized_at, attempted_by
		FROM river_job WHERE kind = 'dispatch' AND args->>'endpoint_id' = ANY($1::text[])`
	rows, err := env.DB.Query(ctx, `WITH j AS (`+jobs+`)
		SELECT count(*) FROM j, unnest(attempted_by) AS client GROUP BY client ORDER BY 1 DESC`, ids)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return d, err
		}
		d.perClient = append(d.perClient, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, err
	}
	err = env.DB.QueryRow(ctx, `WITH j AS (`+jobs+`)
		SELECT (SELECT count(*) FROM (SELECT ep FROM j, unnest(attempted_by) AS client
		                              GROUP BY ep HAVING count(DISTINCT client) > 1) AS multi),
		       (SELECT count(*) FROM j a JOIN j b ON a.ep = b.ep AND a.id < b.id
		         AND a.attempted_at < coalesce(b.finalized_at, now()) AND b.attempted_at < coalesce(a.finalized_at, now()))`,
		ids).Scan(&d.both, &d.overlaps)
	return d, err
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}
