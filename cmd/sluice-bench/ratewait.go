package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/jobs"
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
// the worker processes (River clients), read from River's jobs, where
// completed jobs stay for an hour.
type dispatchSpread struct {
	perClient []int // runs per worker process, most first
	both      int   // endpoints whose runs were in more than one process
	overlaps  int   // pairs of runs of one endpoint that overlapped in time
}

func readDispatchSpread(ctx context.Context, env *Env, ids []string) (dispatchSpread, error) {
	endpointIDs, err := parseUUIDs(ids)
	if err != nil {
		return dispatchSpread{}, err
	}
	runs, err := jobs.DispatchRuns(ctx, env.DB, endpointIDs)
	if err != nil {
		return dispatchSpread{}, fmt.Errorf("dispatch spread: %w", err)
	}
	return spreadOf(runs), nil
}

// spreadOf is the dispatchSpread of the runs.
func spreadOf(runs []jobs.DispatchRun) dispatchSpread {
	var d dispatchSpread
	perClient := map[string]int{}
	clients := map[uuid.UUID]map[string]bool{}
	byEndpoint := map[uuid.UUID][]jobs.DispatchRun{}
	for _, r := range runs {
		for _, c := range r.AttemptedBy {
			perClient[c]++
			if clients[r.EndpointID] == nil {
				clients[r.EndpointID] = map[string]bool{}
			}
			clients[r.EndpointID][c] = true
		}
		byEndpoint[r.EndpointID] = append(byEndpoint[r.EndpointID], r)
	}
	for _, n := range perClient {
		d.perClient = append(d.perClient, n)
	}
	slices.SortFunc(d.perClient, func(a, b int) int { return b - a })
	for _, cs := range clients {
		if len(cs) > 1 {
			d.both++
		}
	}
	for _, rs := range byEndpoint {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.AttemptedAt != nil && b.AttemptedAt != nil &&
					a.AttemptedAt.Before(b.Until) && b.AttemptedAt.Before(a.Until) {
					d.overlaps++
				}
			}
		}
	}
	return d
}

// parseUUIDs parses endpoint ids.
func parseUUIDs(ids []string) ([]uuid.UUID, error) {
	out := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		var err error
		if out[i], err = uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("endpoint id %q: %w", id, err)
		}
	}
	return out, nil
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
