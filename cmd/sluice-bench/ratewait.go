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

// dispatchRuns counts the runs of the endpoints' dispatch jobs per River
// client (one per worker process) that attempted them: completed jobs stay
// in river_job for an hour.
func dispatchRuns(ctx context.Context, env *Env, ids []string) ([]int, error) {
	rows, err := env.DB.Query(ctx, `
		SELECT count(*) FROM river_job, unnest(attempted_by) AS client
		WHERE kind = 'dispatch' AND args->>'endpoint_id' = ANY($1::text[])
		GROUP BY client ORDER BY 1 DESC`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		runs = append(runs, n)
	}
	return runs, rows.Err()
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
