-- Pull delivery (internal/poll, 00031_poll_delivery.sql).

-- name: MakeEndpointPoll :one
-- Turns an endpoint just created into a poll endpoint, with its cursor row,
-- in the transaction that created it.
WITH cursor_row AS (
    INSERT INTO poll_cursors (endpoint_id) VALUES (@id) ON CONFLICT DO NOTHING
)
UPDATE endpoints SET delivery = 'poll', url = ''
WHERE id = @id
RETURNING *;

-- name: PollEndpoint :one
-- What a poll request needs of its endpoint: what checks its token, its
-- tenant (whose rate limit it draws from), and whether a read has anything
-- to write: deliveries to place (unplaced: the claim index's entries with a
-- next_attempt_at, 00031_poll_delivery.sql) or a cursor past read_position.
-- A read that has nothing to write answers its page without a transaction.
SELECT e.id, e.tenant_id, e.delivery, e.secret_enc, (t.disabled_at IS NOT NULL)::boolean AS tenant_disabled,
    coalesce(c.last_position, 0)::bigint AS last_position, coalesce(c.read_position, 0)::bigint AS read_position,
    EXISTS (
        SELECT 1 FROM deliveries d
        WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed')
          AND d.next_attempt_at IS NOT NULL AND d.poll_position IS NULL
    ) AS unplaced
FROM endpoints e
JOIN tenants t ON t.id = e.tenant_id
LEFT JOIN poll_cursors c ON c.endpoint_id = e.id
WHERE e.id = @id;

-- name: PollEndpoints :many
-- Which of these endpoints are poll endpoints.
SELECT id FROM endpoints WHERE id = ANY(@ids::uuid[]) AND delivery = 'poll';

-- name: LockPollCursor :one
-- Serialises the reads of one poll endpoint: positions are given and
-- deliveries marked under this lock.
SELECT last_position, read_position FROM poll_cursors
WHERE endpoint_id = @endpoint_id
FOR UPDATE;

-- name: PlacePollDeliveries :many
-- Gives the next positions after last_position to up to max_rows of the
-- endpoint's pending deliveries that have none yet, in event order. The
-- unplaced ones are those of the claim index with a next_attempt_at
-- (placing clears it), so this reads them alone, not the unread backlog.
-- A delivery re-pointed by coalescing meanwhile is skipped (its event_id
-- no longer matches) and placed by a later read.
UPDATE deliveries d SET poll_position = n.place, next_attempt_at = NULL
FROM (
    SELECT u.id, u.event_id, sqlc.arg(last_position)::bigint + row_number() OVER (ORDER BY u.event_id, u.id) AS place
    FROM (
        SELECT q.id, q.event_id FROM deliveries q
        WHERE q.endpoint_id = @endpoint_id AND q.status IN ('pending', 'failed')
          AND q.next_attempt_at IS NOT NULL AND q.poll_position IS NULL
        ORDER BY q.next_attempt_at, q.id
        LIMIT @max_rows
    ) u
) n
WHERE d.id = n.id AND d.event_id = n.event_id AND d.poll_position IS NULL
RETURNING d.poll_position::bigint AS place;

-- name: MarkPollDelivered :execrows
-- Marks the endpoint's positioned deliveries in (after, upto] still pending
-- as delivered, each with an attempt of status 200.
WITH done AS (
    UPDATE deliveries d SET status = 'delivered', attempt_count = d.attempt_count + 1,
        next_attempt_at = NULL, updated_at = now()
    WHERE d.endpoint_id = @endpoint_id AND d.poll_position > @after::bigint AND d.poll_position <= @upto::bigint
      AND d.status = 'pending'
    RETURNING d.id, d.endpoint_id, d.event_id
)
INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, latency_ms)
SELECT id, endpoint_id, event_id, now(), 200, 0 FROM done;

-- name: SavePollCursor :exec
UPDATE poll_cursors SET
    last_position = @last_position,
    read_at = CASE WHEN @read_position::bigint > read_position THEN now() ELSE read_at END,
    read_position = greatest(read_position, @read_position::bigint)
WHERE endpoint_id = @endpoint_id;

-- name: PollPage :many
-- The endpoint's positioned deliveries after a cursor, in position order,
-- with their events. A row's payload is NULL when the payloads stored up
-- to it pass max_bytes (as in ListEvents): the page ends before it.
SELECT place, event_id, type,
       (CASE WHEN sum(stored) OVER w <= @max_bytes::bigint OR count(*) OVER w = 1 THEN payload END)::json AS payload,
       created_at
FROM (
SELECT d.poll_position::bigint AS place, ev.id AS event_id, ev.type, ev.payload, ev.created_at,
       pg_column_size(ev.payload)::bigint AS stored
FROM deliveries d
JOIN events ev ON ev.id = d.event_id
WHERE d.endpoint_id = @endpoint_id AND d.poll_position > @after::bigint
ORDER BY d.poll_position
LIMIT @max_rows) p
WINDOW w AS (ORDER BY place ROWS UNBOUNDED PRECEDING)
ORDER BY place;

-- name: PollCursor :one
-- A poll endpoint's reading so far, for its page in the dashboard.
SELECT last_position, read_position, read_at FROM poll_cursors WHERE endpoint_id = @endpoint_id;
