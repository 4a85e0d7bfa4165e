package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// liveDispatchSQL finds which endpoints have a live dispatch job, from the
// index of live dispatch jobs (00015_live_dispatch_jobs_index.sql, whose
// predicate this repeats).
const liveDispatchSQL = `
SELECT DISTINCT (j.args ->> 'endpoint_id')::uuid FROM river_job j
WHERE j.kind = 'dispatch'
  AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
  AND j.args ->> 'endpoint_id' = ANY($1::text[])`

// LiveDispatch reports which of the endpoints have a live dispatch job
// (dispatch.Nudger.Nudge).
func (s *Store) LiveDispatch(ctx context.Context, endpointIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	keys := make([]string, len(endpointIDs))
	for i, id := range endpointIDs {
		keys[i] = id.String()
	}
	rows, err := s.pool.Query(ctx, liveDispatchSQL, keys)
	if err != nil {
		return nil, fmt.Errorf("query live dispatch jobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("read live dispatch jobs: %w", err)
	}
	live := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

// Notify sends payload on a Postgres notification channel.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// InAsyncTx runs fn in a transaction whose commit does not wait for the
// WAL flush (inAsyncTx): for the dispatch jobs Nudge queues, which the
// sweeper's walk queues again if a crash loses them.
func (s *Store) InAsyncTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inAsyncTx(ctx, fn)
}
