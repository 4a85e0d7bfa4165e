-- name: LockEndpointForDispatch :one
-- Locks the endpoint row for one dispatch step. NO KEY UPDATE does not block
-- fan-out, whose delivery inserts take KEY SHARE on this row.
SELECT sqlc.embed(e), t.throttled_until, t.reason AS throttle_reason, t.consecutive_429s
FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
WHERE e.id = @id
FOR NO KEY UPDATE OF e;

-- name: ReadEndpointForDispatch :one
-- What LockEndpointForDispatch reads, without the lock and outside any
-- transaction: a run's reading again of an endpoint that needs nothing
-- decided under its lock (dispatch.knownTarget).
SELECT sqlc.embed(e), t.throttled_until, t.reason AS throttle_reason, t.consecutive_429s
FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
WHERE e.id = @id;

-- name: SaveFlow :exec
UPDATE endpoints SET
    bucket_tokens = @bucket_tokens,
    bucket_at = @bucket_at,
    circuit_state = @circuit_state,
    consecutive_failures = @consecutive_failures,
    circuit_opened_at = @circuit_opened_at,
    circuit_next_probe_at = @circuit_next_probe_at,
    circuit_probe_ms = @circuit_probe_ms,
    last_error = @last_error,
    adaptive_rate = @adaptive_rate,
    adaptive_rate_at = @adaptive_rate_at,
    adaptive_halved_at = @adaptive_halved_at
WHERE id = @id;

-- name: UpsertThrottle :exec
INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
VALUES (@endpoint_id, @throttled_until, @reason, @consecutive_429s)
ON CONFLICT (endpoint_id) DO UPDATE SET
    throttled_until = excluded.throttled_until,
    reason = excluded.reason,
    consecutive_429s = excluded.consecutive_429s,
    updated_at = now();

-- name: DeleteThrottle :exec
DELETE FROM destination_throttle WHERE endpoint_id = @endpoint_id;

-- name: SetParkedJob :exec
UPDATE endpoints SET parked_job_id = @job_id WHERE id = @id;

-- name: LockEndpointToFinish :one
-- Locks the endpoint row against fan-out (whose delivery inserts take KEY
-- SHARE) before the dispatch job decides it is done: see 00002_events.sql.
-- Returns when the endpoint's next retry is due, as last written, and
-- whether it is FIFO (which deliveries count as due: NextQueuedFIFO).
SELECT id, retry_due_at, ordering = 'fifo' AS fifo FROM endpoints WHERE id = @id FOR UPDATE;

-- name: SetRetryDue :exec
-- Writes when the endpoint's first queued retry is due (NULL: none), as a
-- dispatch run ends, for the sweeper (00016_endpoint_retry_due.sql).
UPDATE endpoints SET retry_due_at = sqlc.narg('retry_due_at') WHERE id = @id;

-- ClaimDueDeliveries reads endpoints' next due deliveries, oldest due
-- first. It locks nothing, because nothing here needs excluding: only one
-- dispatch run serves an endpoint at a time (River's unique dispatch job,
-- and the run's lease, which the sweeper checks before it replaces a job),
-- and a row lock would be released when the claim commits, before anything
-- is sent. What a concurrent writer may do to a claimed delivery is made
-- safe where it is written: a fan-out re-pointing it at a newer event
-- (coalescing) is seen by RecordOutcomes, which compares event ids and
-- keeps it pending for the new payload; a replay or deletion is seen there
-- too. Its index (deliveries_claim_idx) is its order, so it reads max_rows
-- index entries whatever the backlog. It claims for many endpoints in one
-- statement, each up to its own limit: the unlocked claims of concurrent
-- dispatch runs are group-committed (internal/dispatch/claimer.go).
--
-- Each claim starts after a position in the queue (after_at, after_id):
-- where the run's last full claim ended (dispatch.Position). The deliveries
-- before it are mostly that run's own, recorded; their index entries stay
-- until vacuum, and a claim starting at the front of a draining backlog
-- would step over every one of them, slowing as the backlog drains. One
-- that lands behind the position (a fan-out that
-- committed late) is claimed when a claim comes up short and the run
-- starts from the front again. The zero position is before every delivery.
--
-- A payload stored in over 1 MiB (SLUICE_MAX_PAYLOAD raised past its
-- default) is left out (NULL): the deliveries of one large event in flight
-- at once, to many endpoints, share one reading of it (LargePayload)
-- instead of each reading and holding a copy. pg_column_size reads the
-- stored size without decompressing the value (json has no cast to text
-- that would not copy it).
-- name: ClaimDueDeliveries :many
WITH r AS (
    SELECT unnest(@endpoint_ids::uuid[]) AS endpoint_id, unnest(@max_rows::int[]) AS max_rows,
           unnest(@after_ats::timestamptz[]) AS after_at, unnest(@after_ids::uuid[]) AS after_id
)
SELECT true AS claimed, r.endpoint_id::uuid AS endpoint_id, c.id, c.event_id, c.failure_count, c.attempt_count,
       c.replayed, c.next_attempt_at, c.type, c.payload, c.event_created_at, c.trace_context
FROM r
CROSS JOIN LATERAL (
    SELECT d.id, d.event_id, d.failure_count, d.attempt_count, (d.replayed_from IS NOT NULL)::boolean AS replayed,
           d.next_attempt_at, e.type, (CASE WHEN pg_column_size(e.payload) <= 1048576 THEN e.payload END)::json AS payload,
           e.created_at AS event_created_at, e.trace_context
    FROM deliveries d
    JOIN events e ON e.id = d.event_id
    WHERE d.endpoint_id = r.endpoint_id
      AND d.status IN ('pending', 'failed')
      AND d.next_attempt_at <= now()
      AND (d.next_attempt_at, d.id) > (r.after_at, r.after_id)
    ORDER BY d.next_attempt_at, d.id
    LIMIT r.max_rows
) c
UNION ALL
-- For each endpoint whose earliest queued delivery (after the position)
-- is not yet due, a row that claims nothing (claimed false, no id) and says
-- when it will be due, so that the run knows whether to wait for a retry
-- without asking.
SELECT false, r.endpoint_id::uuid, NULL, NULL, 0, 0, false, n.next_attempt_at, '', NULL, n.next_attempt_at, NULL
FROM r
CROSS JOIN LATERAL (
    SELECT q.next_attempt_at FROM deliveries q
    WHERE q.endpoint_id = r.endpoint_id AND q.status IN ('pending', 'failed')
      AND (q.next_attempt_at, q.id) > (r.after_at, r.after_id)
    ORDER BY q.next_attempt_at, q.id
    LIMIT 1
) n
WHERE n.next_attempt_at > now();

-- name: EventPayload :one
-- An event's payload as stored: a fan-out that matches a filter in Go
-- reads a large one it left out (EventsByID).
SELECT payload FROM events WHERE id = @id;

-- name: LargePayload :many
-- A large event's payload as stored, in pieces of at most @piece bytes in
-- order, for the deliveries that a claim left it out of
-- (ClaimDueDeliveries), with its size and how many of its deliveries are
-- still to be sent (queued, the ones in flight among them): a worker keeps
-- the payload a while for those (internal/dispatch/large.go,
-- sharedPayloads). In pieces, so that the driver reads no message the
-- payload's size (it would keep a buffer that large for its next reads).
SELECT octet_length(s.payload)::int AS size, s.sends,
       substring(s.payload FROM g FOR @piece::int)::bytea AS piece
FROM (SELECT convert_to(e.payload::text, 'UTF8') AS payload,
             (SELECT count(*) FROM deliveries d
              WHERE d.event_id = e.id AND (d.replayed_from IS NULL OR d.replayed_from IS NOT NULL)
                AND d.status IN ('pending', 'failed'))::int AS sends
      FROM events e WHERE e.id = @id
      OFFSET 0) s,
     generate_series(1, octet_length(s.payload), @piece::int) g
ORDER BY g;

-- name: NextLargeEvents :many
-- The events of an endpoint's next due deliveries after a position (those a
-- claim from there would take now, up to max_rows) whose payloads are
-- stored in over 1 MiB: a run sending large payloads reads them while its
-- batch is sent (internal/dispatch/large.go, readAhead). It reads max_rows
-- index entries, as the claim does, and then the events of those alone.
SELECT n.event_id::uuid AS event_id
FROM (
    SELECT d.event_id FROM deliveries d
    WHERE d.endpoint_id = @endpoint_id
      AND d.status IN ('pending', 'failed')
      AND d.next_attempt_at <= now()
      AND (d.next_attempt_at, d.id) > (@after_at::timestamptz, @after_id::uuid)
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max_rows::int
) n
JOIN events e ON e.id = n.event_id
WHERE pg_column_size(e.payload) > 1048576;

-- name: NextQueuedDelivery :one
-- The final check before a dispatch run ends: when the endpoint's first
-- queued delivery is due, and whether it is due already. It compares with
-- clock_timestamp(), the time it runs, not now(), its transaction's start:
-- fan-out gives new deliveries its own transaction's now(), which can be
-- later than this transaction's start if that fan-out began meanwhile and
-- committed while this one waited for the endpoint lock.
SELECT d.next_attempt_at, coalesce(d.next_attempt_at <= clock_timestamp(), false)::bool AS due
FROM (SELECT 1) one
LEFT JOIN LATERAL (
    SELECT next_attempt_at FROM deliveries
    WHERE endpoint_id = @endpoint_id AND status IN ('pending', 'failed')
    ORDER BY next_attempt_at LIMIT 1
) d ON true;

-- name: RecordOutcomes :exec
-- Applies one batch of attempts to their deliveries and stores them, in one
-- statement. A delivery re-pointed at a newer event while in flight
-- (coalescing) stays pending, to send the new payload. Each delivery is
-- looked up once, in the partition of its claimed event's week: coalescing
-- keeps a delivery within its week, and the caller passes each week's
-- bounds (store.WeekBounds), so Postgres probes one partition per row with
-- nothing to compute. A delivery deleted with its endpoint while in flight
-- is not found, and its attempt is dropped without failing the others
-- batched with it.
WITH outcome AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@event_ids::uuid[]) AS event_id,
           unnest(@week_los::uuid[]) AS week_lo, unnest(@week_his::uuid[]) AS week_hi,
           unnest(@statuses::text[]) AS status, unnest(@failed::int[]) AS failed,
           unnest(@next_attempt_ats::timestamptz[]) AS next_attempt_at,
           unnest(@ats::timestamptz[]) AS at, nullif(unnest(@status_codes::int[]), 0) AS status_code,
           nullif(unnest(@errors::text[]), '') AS error, unnest(@latencies_ms::int[]) AS latency_ms,
           nullif(unnest(@bodies::text[]), '') AS response_body
), applied AS (
    UPDATE deliveries d SET
        status = CASE WHEN d.event_id = o.event_id THEN o.status ELSE 'pending' END,
        attempt_count = d.attempt_count + 1,
        failure_count = d.failure_count + o.failed,
        next_attempt_at = CASE
            WHEN d.event_id <> o.event_id THEN now()
            WHEN o.status IN ('delivered', 'dead') THEN NULL
            ELSE o.next_attempt_at END,
        updated_at = now()
    FROM outcome o
    WHERE d.id = o.id AND d.event_id >= o.week_lo AND d.event_id < o.week_hi
    RETURNING d.id, d.endpoint_id, d.event_id, o.at, o.status_code, o.error, o.latency_ms, o.response_body
)
INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, error, latency_ms, response_body)
SELECT id, endpoint_id, event_id, at, status_code, error, latency_ms, response_body FROM applied;

-- name: QueuedDeliveries :one
SELECT count(*) FROM deliveries WHERE endpoint_id = @endpoint_id AND status IN ('pending', 'failed');

-- name: TakeRetriesDue :many
-- Clears and returns up to max_rows endpoints whose next retry is due, for
-- the sweeper to queue their dispatch. Rows a dispatch step holds are
-- skipped: the step's run is live, and a finishing run writes a new time.
UPDATE endpoints e SET retry_due_at = NULL
FROM (
    SELECT id FROM endpoints
    WHERE retry_due_at <= now()
    ORDER BY retry_due_at
    LIMIT @max_rows
    FOR NO KEY UPDATE SKIP LOCKED
) due
WHERE e.id = due.id
RETURNING e.id;

-- name: EndpointVerified :execrows
-- Records that the endpoint answered a challenge sent to url: unless its
-- URL changed meanwhile (that one must be proved again) or it was
-- verified already.
UPDATE endpoints SET verified_at = now(), verification_error = NULL
WHERE id = @id AND url = @url AND verified_at IS NULL;

-- name: EndpointVerificationFailed :exec
-- Records why a challenge sent to url failed, unless its URL changed
-- meanwhile.
UPDATE endpoints SET verification_error = @error
WHERE id = @id AND url = @url AND verified_at IS NULL;

-- name: Notify :exec
-- Sends payload on a Postgres notification channel (the wake channel of
-- package dispatch): at once, or when the transaction it runs in commits.
SELECT pg_notify(@channel::text, @payload::text);
