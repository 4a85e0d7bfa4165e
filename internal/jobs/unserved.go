package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// endpointsNeedingDispatchSQL lists enabled push endpoints after $2 (in id
// order) with a delivery due now and no dispatch job queued, running,
// scheduled (parked) or waiting to retry (LiveStates). Endpoints held by a
// throttle or an open circuit are skipped: their parked job comes due when
// the wait ends.
//
// Its cost follows the endpoints that have deliveries queued, not all
// endpoints nor all queued deliveries: a skip scan of the queue index
// (queued) steps from one such endpoint to the next, one probe per week's
// partition each, so an idle database answers at once however many
// endpoints it has (the steps ask for the queue index's own order, so no
// other index can serve them). Each endpoint found costs a probe of its
// due queue for its oldest row and one of the index of live dispatch jobs
// (00015_live_dispatch_jobs_index.sql, whose predicate this repeats),
// whatever its backlog and its history. Both probes are fenced (OFFSET 0)
// so that Postgres cannot turn them into joins that read every due
// delivery (all of a throttled endpoint's backlog) or test every endpoint
// against every live job (TestWalkProbesOnlyLiveDispatchJobs). In steady
// state the answer is empty. Hand-written because sqlc does not see
// River's tables.
var endpointsNeedingDispatchSQL = `
WITH RECURSIVE queued AS (
    (SELECT d.endpoint_id FROM deliveries d
     WHERE d.status IN ('pending', 'failed') AND d.endpoint_id > $2::uuid
     ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
    UNION ALL
    SELECT (SELECT d.endpoint_id FROM deliveries d
            WHERE d.status IN ('pending', 'failed') AND d.endpoint_id > q.endpoint_id
            ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
    FROM queued q WHERE q.endpoint_id IS NOT NULL
)
SELECT n.id FROM queued q
CROSS JOIN LATERAL (
    SELECT e.id FROM endpoints e
    LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
    WHERE e.id = q.endpoint_id
      AND NOT e.disabled
      AND e.delivery = 'push' -- a poll endpoint is read, not dispatched
      AND (t.throttled_until IS NULL OR t.throttled_until <= now())
      AND NOT (e.circuit_state = 'open' AND e.circuit_next_probe_at > now())
      AND EXISTS (
          SELECT 1 FROM deliveries d
          WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed') AND d.next_attempt_at <= now()
          ORDER BY d.next_attempt_at LIMIT 1 OFFSET 0)
      AND NOT EXISTS (
          SELECT 1 FROM river_job j
          WHERE j.kind = 'dispatch' AND j.args ->> 'endpoint_id' = e.id::text
            AND j.state IN ` + LiveStatesSQL + `
          OFFSET 0)
    OFFSET 0
) n
LIMIT $1`

// EndpointsNeedingDispatch lists up to limit endpoints with deliveries due
// and no live dispatch job (see endpointsNeedingDispatchSQL), in id order
// from the first after after (uuid.Nil: from the first of all).
func EndpointsNeedingDispatch(ctx context.Context, db DBTX, limit int, after uuid.UUID) ([]uuid.UUID, error) {
	rows, err := db.Query(ctx, endpointsNeedingDispatchSQL, limit, after)
	if err != nil {
		return nil, fmt.Errorf("list endpoints needing dispatch: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("list endpoints needing dispatch: %w", err)
	}
	return ids, nil
}
