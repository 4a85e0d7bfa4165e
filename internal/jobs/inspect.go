package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What the benchmark (cmd/sluice-bench) and the fault suite
// (cmd/sluice-faults) read of River's tables, so that they need not know
// River's schema or the live states: counts and samples of jobs, read
// without locks.

// JobTable is River's job table, for tools that vacuum or analyze it
// together with Sluice's own tables.
const JobTable = "river_job"

// liveFanoutSQL finds which of the events ($1) a live fan-out job holds.
var liveFanoutSQL = `
SELECT DISTINCT e.id::uuid FROM river_job j, jsonb_array_elements_text(j.args -> 'event_ids') AS e(id)
WHERE j.kind = 'fanout' AND j.state IN ` + LiveStatesSQL + `
  AND j.args -> 'event_ids' ?| $1::text[] AND e.id = ANY($1::text[])`

// LiveFanout reports which of the events a live fan-out job holds.
func LiveFanout(ctx context.Context, db DBTX, eventIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := db.Query(ctx, liveFanoutSQL, uuidStrings(eventIDs))
	if err != nil {
		return nil, fmt.Errorf("look up live fan-out jobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("look up live fan-out jobs: %w", err)
	}
	live := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

// KindStateCount is how many jobs of a kind are in a state.
type KindStateCount struct {
	Kind, State string
	Jobs        int
}

// CountByKindAndState counts the jobs River holds by kind and state,
// ordered by kind, then state.
func CountByKindAndState(ctx context.Context, db DBTX) ([]KindStateCount, error) {
	rows, err := db.Query(ctx, `SELECT kind, state::text, count(*)::int FROM river_job GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("count jobs by kind and state: %w", err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[KindStateCount])
	if err != nil {
		return nil, fmt.Errorf("count jobs by kind and state: %w", err)
	}
	return counts, nil
}

// StateSummary is what the live dispatch jobs in one state look like.
type StateSummary struct {
	State string
	Jobs  int
	// LatestIn is how far in the future the latest of them is scheduled
	// (negative: in the past).
	LatestIn time.Duration
	// LastError is the last error of one of them, if they are retryable.
	LastError string
}

// LiveDispatchByState summarizes the live dispatch jobs by state.
func LiveDispatchByState(ctx context.Context, db DBTX) ([]StateSummary, error) {
	rows, err := db.Query(ctx, `
		SELECT state::text, count(*)::int, coalesce(extract(epoch FROM max(scheduled_at) - now()), 0)::float8,
		       coalesce(max(errors[array_length(errors, 1)]->>'error') FILTER (WHERE state = 'retryable'), '')
		FROM river_job WHERE kind = 'dispatch' AND state IN `+LiveStatesSQL+` GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("summarize live dispatch jobs: %w", err)
	}
	var out []StateSummary
	for rows.Next() {
		var s StateSummary
		var latest float64
		if err := rows.Scan(&s.State, &s.Jobs, &latest, &s.LastError); err != nil {
			rows.Close()
			return nil, fmt.Errorf("summarize live dispatch jobs: %w", err)
		}
		s.LatestIn = time.Duration(latest * float64(time.Second))
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("summarize live dispatch jobs: %w", err)
	}
	return out, nil
}

// CountActiveDispatch counts the endpoints' dispatch jobs that run or are
// due to run now: neither parked (available with a future scheduled_at)
// nor waiting to retry.
func CountActiveDispatch(ctx context.Context, db DBTX, endpointIDs []uuid.UUID) (int, error) {
	var n int
	err := db.QueryRow(ctx, `
		SELECT count(*) FROM river_job WHERE kind = 'dispatch'
		  AND (state = 'running' OR state = 'available' AND scheduled_at <= now())
		  AND args->>'endpoint_id' = ANY($1::text[])`, uuidStrings(endpointIDs)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count active dispatch jobs: %w", err)
	}
	return n, nil
}

// CountLive counts the live jobs in the queues, leaving out the dispatch
// jobs of the endpoints in except.
func CountLive(ctx context.Context, db DBTX, queues []string, except []uuid.UUID) (int, error) {
	var n int
	err := db.QueryRow(ctx, `
		SELECT count(*) FROM river_job WHERE queue = ANY($1::text[])
		  AND state IN `+LiveStatesSQL+`
		  AND NOT coalesce(args->>'endpoint_id' = ANY($2::text[]), false)`, queues, uuidStrings(except)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live jobs: %w", err)
	}
	return n, nil
}

// CompletedSinceElection reports whether a job of kind has completed since
// River's current leader was elected.
func CompletedSinceElection(ctx context.Context, db DBTX, kind string) (bool, error) {
	var done bool
	err := db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM river_job j JOIN river_leader l ON j.finalized_at >= l.elected_at
		               WHERE j.kind = $1 AND j.state = 'completed')`, kind).Scan(&done)
	if err != nil {
		return false, fmt.Errorf("look for a completed %s job: %w", kind, err)
	}
	return done, nil
}

// DispatchRun is one dispatch job as its runs left it.
type DispatchRun struct {
	JobID      int64
	EndpointID uuid.UUID
	// AttemptedAt is when its last run started; nil if it never ran.
	AttemptedAt *time.Time
	// Until is when it was finalized, or now if it was not.
	Until time.Time
	// AttemptedBy are the River clients (worker processes) that ran it.
	AttemptedBy []string
}

// DispatchRuns returns the dispatch jobs of the endpoints that River still
// holds (completed jobs stay until River's cleaner removes them), in job
// order.
func DispatchRuns(ctx context.Context, db DBTX, endpointIDs []uuid.UUID) ([]DispatchRun, error) {
	rows, err := db.Query(ctx, `
		SELECT id, (args->>'endpoint_id')::uuid, attempted_at, coalesce(finalized_at, now()), coalesce(attempted_by, '{}')
		FROM river_job WHERE kind = 'dispatch' AND args->>'endpoint_id' = ANY($1::text[])
		ORDER BY id`, uuidStrings(endpointIDs))
	if err != nil {
		return nil, fmt.Errorf("read dispatch runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DispatchRun])
	if err != nil {
		return nil, fmt.Errorf("read dispatch runs: %w", err)
	}
	return runs, nil
}

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
