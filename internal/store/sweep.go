package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ClaimSweep reports whether this process may run the named sweep now: it
// is the first to ask since at least every ago (table sweeps).
func (s *Store) ClaimSweep(ctx context.Context, name string, every time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx,
		`UPDATE sweeps SET swept_at = now() WHERE name = $1 AND swept_at <= now() - make_interval(secs => $2::float8)`,
		name, every.Seconds())
	if err != nil {
		return false, fmt.Errorf("claim sweep: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// endpointsNeedingDispatchSQL lists enabled endpoints with a delivery due now
// and no dispatch job queued, running, scheduled (parked) or waiting to
// retry. Endpoints held by a throttle or an open circuit are skipped: their
// parked job comes due when the wait ends. Each endpoint costs a probe of
// its due queue in each week's partition and one of the index of live
// dispatch jobs (00015_live_dispatch_jobs_index.sql, whose predicate this
// repeats), whatever its backlog and its history. Both checks are fenced
// (OFFSET 0) so that Postgres cannot turn them into joins that read every
// due delivery (a throttled endpoint's 10,000 held back cost each sweep
// 13 ms, against 0.5) or test every endpoint against every live job; the
// due-queue probe asks for its oldest row, which only the queue index gives
// cheaply, so skewed statistics cannot make it a scan of the partition. In
// steady state the answer is empty. Hand-written because sqlc does not see
// River's tables.
const endpointsNeedingDispatchSQL = `
SELECT e.id FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
WHERE NOT e.disabled
  AND (t.throttled_until IS NULL OR t.throttled_until <= now())
  AND NOT (e.circuit_state = 'open' AND e.circuit_next_probe_at > now())
  AND EXISTS (
      SELECT 1 FROM deliveries d
      WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed') AND d.next_attempt_at <= now()
      ORDER BY d.next_attempt_at LIMIT 1 OFFSET 0)
  AND NOT EXISTS (
      SELECT 1 FROM river_job j
      WHERE j.kind = 'dispatch' AND j.args ->> 'endpoint_id' = e.id::text
        AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
      OFFSET 0)
LIMIT $1`

// EndpointsNeedingDispatch lists up to limit endpoints with deliveries due
// and nothing to dispatch them (see endpointsNeedingDispatchSQL).
func (s *Store) EndpointsNeedingDispatch(ctx context.Context, limit int) ([]uuid.UUID, error) {
	rows, err := s.pool.Query(ctx, endpointsNeedingDispatchSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("endpoints needing dispatch: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("endpoints needing dispatch: %w", err)
	}
	return ids, nil
}
