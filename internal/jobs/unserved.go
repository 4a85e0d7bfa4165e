package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// endpointsNeedingDispatchSQL looks at up to $1 endpoints with deliveries
// queued, after $2 in id order, and answers each with whether it needs a
// dispatch job: it is an enabled push endpoint with a delivery due now and
// no dispatch job queued, running, scheduled (parked) or waiting to retry
// (LiveStates). Endpoints held by a throttle or an open circuit do not:
// their parked job comes due when the wait ends.
//
// Its cost follows the endpoints it looks at, at most $1, not all
// endpoints nor all queued deliveries: a skip scan of the queue index
// (queued) steps from one endpoint with deliveries queued to the next, one
// probe per week's partition each, so an idle database answers at once
// however many endpoints it has (the steps ask for the queue index's own
// order, so no other index can serve them), and thousands of endpoints
// held by a throttle, an open circuit or their owner cost a walk no more
// than $1 steps. Each endpoint looked at costs a probe of its due queue
// for its oldest row and one of the index of live dispatch jobs
// (00015_live_dispatch_jobs_index.sql, whose predicate this repeats),
// whatever its backlog and its history. Both probes are fenced (OFFSET 0)
// so that Postgres cannot turn them into joins that read every due
// delivery (all of a throttled endpoint's backlog) or test every endpoint
// against every live job (TestWalkProbesOnlyLiveDispatchJobs). In steady
// state no endpoint needs one. Hand-written because sqlc does not see
// River's tables.
var endpointsNeedingDispatchSQL = `
WITH RECURSIVE queued AS (
    (SELECT d.endpoint_id, 1 AS step FROM deliveries d
     WHERE d.status IN ('pending', 'failed') AND d.endpoint_id > $2::uuid
     ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1)
    UNION ALL
    SELECT (SELECT d.endpoint_id FROM deliveries d
            WHERE d.status IN ('pending', 'failed') AND d.endpoint_id > q.endpoint_id
            ORDER BY d.endpoint_id, d.next_attempt_at LIMIT 1), q.step + 1
    FROM queued q WHERE q.endpoint_id IS NOT NULL AND q.step < $1
)
SELECT q.endpoint_id, n.id IS NOT NULL FROM queued q
LEFT JOIN LATERAL (
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
) n ON true
WHERE q.endpoint_id IS NOT NULL`

// Walk is what one walk of the endpoints with deliveries queued found.
type Walk struct {
	// Due are the endpoints that need a dispatch job, in id order.
	Due []uuid.UUID
	// Last is the last endpoint the walk looked at when it looked at as
	// many as it may, so that the next walk goes on after it; uuid.Nil
	// when it reached the last endpoint with deliveries queued.
	Last uuid.UUID
}

// EndpointsNeedingDispatch walks up to limit endpoints with deliveries
// queued, in id order from the first after after (uuid.Nil: from the
// first of all), and answers those that need a dispatch job (see
// endpointsNeedingDispatchSQL).
func EndpointsNeedingDispatch(ctx context.Context, db DBTX, limit int, after uuid.UUID) (Walk, error) {
	rows, err := db.Query(ctx, endpointsNeedingDispatchSQL, limit, after)
	if err != nil {
		return Walk{}, fmt.Errorf("walk the endpoints with deliveries queued: %w", err)
	}
	type looked struct {
		id  uuid.UUID
		due bool
	}
	seen, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (looked, error) {
		var l looked
		if err := r.Scan(&l.id, &l.due); err != nil {
			return l, fmt.Errorf("scan an endpoint: %w", err)
		}
		return l, nil
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Walk{}, fmt.Errorf("walk the endpoints with deliveries queued: %w", err)
	}
	var w Walk
	for _, l := range seen {
		if l.due {
			w.Due = append(w.Due, l.id)
		}
	}
	if len(seen) == limit {
		w.Last = seen[len(seen)-1].id
	}
	return w, nil
}
