-- FIFO endpoints (db/migrations/00030_fifo.sql, internal/dispatch/fifo.go).

-- name: FIFOHeads :many
-- The head of each of a FIFO endpoint's lines: its queued delivery with the
-- lowest position, one row per line, oldest position first. A skip scan of
-- deliveries_fifo_idx: one probe per line, however long the lines are.
-- due says whether the head may be sent now (by the clock at the time it
-- runs, as NextQueuedDelivery says why); unrouted whether an event of the
-- tenant accepted before it still waits for its fan-out job, whose
-- delivery, once made, may belong in front of it.
WITH RECURSIVE line AS (
    (SELECT d.ordering_key, d.fifo_position, d.id, d.event_id, d.tenant_id, d.next_attempt_at, d.fifo_sequence
     FROM deliveries d
     WHERE d.endpoint_id = @endpoint_id AND d.fifo_position IS NOT NULL AND d.status IN ('pending', 'failed')
     ORDER BY d.ordering_key, d.fifo_position
     LIMIT 1)
    UNION ALL
    SELECT n.ordering_key, n.fifo_position, n.id, n.event_id, n.tenant_id, n.next_attempt_at, n.fifo_sequence
    FROM line l
    CROSS JOIN LATERAL (
        SELECT d.ordering_key, d.fifo_position, d.id, d.event_id, d.tenant_id, d.next_attempt_at, d.fifo_sequence
        FROM deliveries d
        WHERE d.endpoint_id = @endpoint_id AND d.fifo_position IS NOT NULL AND d.status IN ('pending', 'failed')
          AND d.ordering_key > l.ordering_key
        ORDER BY d.ordering_key, d.fifo_position
        LIMIT 1
    ) n
)
SELECT l.id::uuid AS id, l.event_id::uuid AS event_id, l.ordering_key::text AS ordering_key,
       l.fifo_position::uuid AS fifo_position, l.next_attempt_at::timestamptz AS next_attempt_at,
       coalesce(l.fifo_sequence, 0)::bigint AS fifo_sequence,
       (l.next_attempt_at <= clock_timestamp())::boolean AS due,
       EXISTS (
           SELECT 1 FROM unrouted_events u WHERE u.tenant_id = l.tenant_id AND u.event_id < l.fifo_position
       )::boolean AS unrouted
FROM line l
ORDER BY l.fifo_position;

-- name: ClaimFIFODeliveries :many
-- Claims the heads a FIFO claim chose (at most one of each line): each that
-- has no sequence number yet gets its line's next one, in the claim's
-- transaction, so that every attempt of it carries the same number. Each
-- delivery is read in its event's week (a coalesced delivery stays in its
-- week: CoalesceDelivery), by id alone, so a head coalesced meanwhile is
-- still claimed, with its new event. A payload stored in over 1 MiB is left
-- out (NULL), as ClaimDueDeliveries leaves it out, and read once for the
-- sends of its event in flight (LargePayload).
WITH head AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@week_los::uuid[]) AS week_lo, unnest(@week_his::uuid[]) AS week_hi,
           unnest(@ordering_keys::text[]) AS ordering_key, unnest(@fresh::bool[]) AS fresh
), bumped AS (
    INSERT INTO fifo_lines (endpoint_id, ordering_key, last_sequence)
    SELECT @endpoint_id::uuid, h.ordering_key, 1 FROM head h WHERE h.fresh
    ON CONFLICT (endpoint_id, ordering_key) DO UPDATE SET last_sequence = fifo_lines.last_sequence + 1
    RETURNING ordering_key, last_sequence
), numbered AS (
    UPDATE deliveries d SET fifo_sequence = b.last_sequence
    FROM head h
    JOIN bumped b ON b.ordering_key = h.ordering_key
    WHERE d.id = h.id AND d.event_id >= h.week_lo AND d.event_id < h.week_hi AND d.fifo_sequence IS NULL
    RETURNING d.id, d.fifo_sequence
)
SELECT d.id, d.event_id, d.failure_count, d.attempt_count, (d.replayed_from IS NOT NULL)::boolean AS replayed,
       d.next_attempt_at, e.type, (CASE WHEN pg_column_size(e.payload) <= 1048576 THEN e.payload END)::json AS payload,
       e.created_at AS event_created_at, e.trace_context,
       coalesce(n.fifo_sequence, d.fifo_sequence, 0)::bigint AS fifo_sequence
FROM head h
JOIN deliveries d ON d.id = h.id AND d.event_id >= h.week_lo AND d.event_id < h.week_hi
JOIN events e ON e.id = d.event_id
LEFT JOIN numbered n ON n.id = d.id
WHERE d.status IN ('pending', 'failed');

-- name: EndpointOrdering :one
SELECT ordering FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: LockEndpointOrdering :exec
-- Locks the endpoint row FOR UPDATE before its ordering changes, against
-- the statements that make its deliveries (their KEY SHARE lock): each
-- either committed before, and BackfillFIFO sees its deliveries, or reads
-- the new ordering once this commits.
SELECT id FROM endpoints WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: SetEndpointOrdering :exec
UPDATE endpoints SET ordering = @ordering, updated_at = now() WHERE tenant_id = @tenant_id AND id = @id;

-- name: BackfillFIFO :exec
-- Puts an endpoint's queued deliveries made before it became FIFO in their
-- lines: an original at its event's place, a replay at its own id's (made
-- when it was replayed). One that has a place already keeps it.
UPDATE deliveries d SET ordering_key = coalesce(ev.ordering_key, ''),
    fifo_position = CASE WHEN d.replayed_from IS NULL THEN d.event_id ELSE d.id END
FROM events ev
WHERE ev.id = d.event_id AND d.endpoint_id = @endpoint_id
  AND d.status IN ('pending', 'failed') AND d.fifo_position IS NULL;

-- name: MarkUnrouted :exec
-- Records events stored with a fan-out job until the job has made their
-- deliveries (FIFOHeads).
INSERT INTO unrouted_events (tenant_id, event_id)
SELECT unnest(@tenant_ids::uuid[]), unnest(@event_ids::uuid[])
ON CONFLICT DO NOTHING;

-- name: MarkRouted :exec
-- Forgets events whose fan-out has made their deliveries, in its
-- transaction.
DELETE FROM unrouted_events u
USING (SELECT unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@event_ids::uuid[]) AS event_id) r
WHERE u.tenant_id = r.tenant_id AND u.event_id = r.event_id;
