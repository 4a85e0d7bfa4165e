-- name: InsertEvent :one
INSERT INTO events (id, tenant_id, type, payload, coalesce_key, idempotency_key, consumer, broadcast, trace_context, ordering_key)
VALUES (@id, @tenant_id, @type, @payload, @coalesce_key, @idempotency_key, sqlc.narg(consumer), @broadcast, sqlc.narg(trace_context),
        sqlc.narg(ordering_key))
RETURNING *;

-- name: LockIdempotencyKey :exec
-- Serializes the requests that carry one tenant's Idempotency-Key until
-- their transactions end: events cannot hold a unique index on the key (a
-- partitioned table's unique indexes hold its partition key). lock_key
-- names the tenant and the key; the two-number form keeps these locks
-- apart from River's and goose's.
SELECT pg_advisory_xact_lock(hashtext('sluice.idempotency'), hashtext(@lock_key::text));

-- name: RecentEventByIdempotencyKey :one
-- The newest event with the key since a time, looking only at the days
-- since then.
SELECT * FROM events
WHERE tenant_id = @tenant_id AND idempotency_key = @idempotency_key
  AND id >= sluice_uuid_at((extract(epoch FROM @since::timestamptz) * 1000)::bigint)
ORDER BY id DESC
LIMIT 1;

-- name: GetEvent :one
SELECT * FROM events WHERE tenant_id = @tenant_id AND id = @id
  AND (id >= (SELECT sluice_delivered_from(@tenant_id)) OR sluice_kept_event(@tenant_id, id));

-- name: ListEvents :many
-- A page of a tenant's events matching the filters given (NULL for none),
-- newest first: by created_at, then id, bounded as ListDeliveries is
-- (00041_search.sql); as one consumer sees them when consumer is given:
-- the events addressed to it and the broadcasts. filter_path is a payload
-- filter compiled to jsonpath (filter.Filter.JSONPath), matched against
-- the payloads of the rows the other conditions leave; a sealed payload (a
-- JSON string, secretbox.Payloads) passes, for the caller to match in Go.
-- A row's payload is NULL when the payloads stored up to it on the page
-- pass max_bytes (pg_column_size, which reads no payload): the caller ends
-- its page before it. The first row's is always read.
SELECT id, tenant_id, type,
       (CASE WHEN sum(stored) OVER w <= @max_bytes::bigint OR count(*) OVER w = 1 THEN payload END)::json AS payload,
       coalesce_key, idempotency_key, created_at, consumer, broadcast, trace_context, ordering_key
FROM (
SELECT ev.*, pg_column_size(ev.payload)::bigint AS stored FROM events ev
WHERE ev.tenant_id = @tenant_id
  AND ev.created_at >= coalesce(sqlc.narg(since)::timestamptz, '-infinity')
  AND (ev.created_at, ev.id) < (
      least(coalesce(sqlc.narg(until)::timestamptz, 'infinity'),
            coalesce((SELECT c.created_at FROM events c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                     to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')),
      CASE WHEN coalesce((SELECT c.created_at FROM events c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                         to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')
                < coalesce(sqlc.narg(until)::timestamptz, 'infinity')
           THEN sqlc.narg(after)::uuid ELSE '00000000-0000-0000-0000-000000000000' END)
  AND (ev.id >= (SELECT sluice_delivered_from(@tenant_id)) OR sluice_kept_event(@tenant_id, ev.id))
  AND (sqlc.narg(type)::text IS NULL OR ev.type = sqlc.narg(type)::text)
  AND (sqlc.narg(type_prefix)::text IS NULL OR starts_with(ev.type, sqlc.narg(type_prefix)::text))
  AND (sqlc.narg(consumer)::text IS NULL OR ev.consumer = sqlc.narg(consumer)::text OR ev.broadcast)
  AND (sqlc.narg(filter_path)::jsonpath IS NULL OR json_typeof(ev.payload) = 'string'
       OR jsonb_path_match(ev.payload::jsonb, sqlc.narg(filter_path)::jsonpath, '{}', true))
ORDER BY ev.created_at DESC, ev.id DESC
LIMIT @max_rows) ev
WINDOW w AS (ORDER BY created_at DESC, id DESC ROWS UNBOUNDED PRECEDING)
ORDER BY created_at DESC, id DESC;

-- name: EventsByID :many
-- Events for a fan-out job, with their payloads when stored in at most
-- 1 MiB: Postgres matches a clear payload's filters itself, so a large one
-- is left out (NULL) rather than read into the worker for nothing; one
-- that a filter may need matched in Go (sealed) is read then (EventPayload).
SELECT id, tenant_id, type,
       (CASE WHEN pg_column_size(payload) <= 1048576 THEN payload END)::json AS payload,
       coalesce_key, idempotency_key, created_at, consumer, broadcast, trace_context, ordering_key
FROM events WHERE id = ANY(@ids::uuid[]) ORDER BY id;

-- SubscriptionsForEvents returns the subscriptions of a tenant's enabled
-- endpoints that a group of events can reach: every endpoint when one of
-- them is broadcast, else the tenant's own endpoints (when one of them has
-- no consumer) and those of the consumers they name; and of those, only
-- subscriptions holding one of the patterns that could match the group's
-- types (sluice.CandidatePatterns), found by key in
-- subscription_patterns. It locks the endpoints it returns FOR KEY SHARE, as the
-- deliveries' foreign key will: an endpoint deleted meanwhile is left out,
-- and none it returns can be deleted before the deliveries commit (which
-- would fail their insert, and with it every event of the group).
-- A subscription with a filter says so (filtered); which events pass it
-- is MatchFilters's to say.
-- name: SubscriptionsForEvents :many
SELECT s.id, s.endpoint_id, s.event_types, e.consumer, (s.filter_path IS NOT NULL)::boolean AS filtered
FROM subscriptions s
JOIN endpoints e ON e.id = s.endpoint_id
WHERE s.id IN (SELECT sp.subscription_id FROM unnest(@patterns::text[]) AS p(pattern)
               CROSS JOIN LATERAL (SELECT sp.subscription_id FROM subscription_patterns sp
                                   WHERE sp.tenant_id = @tenant_id AND sp.pattern = p.pattern
                                   OFFSET 0) sp) -- a probe per pattern, never the tenant's every row
  AND NOT e.disabled
  AND (@broadcast::boolean
       OR (@own::boolean AND e.consumer IS NULL)
       OR e.consumer = ANY(@consumers::text[]))
FOR KEY SHARE OF e;

-- name: InsertEvents :exec
-- Stores a small group of events in one statement and one round trip
-- (fanout.insertEvents; a large group goes by COPY). A consumer is stored
-- only where has_consumers says there is one, so that "" stays "", and a
-- trace context ("" for none) only where there is one; trace_contexts is
-- NULL when no event has one (unnest runs a select list's arrays in
-- lockstep, padding a shorter one with NULLs); ordering_keys likewise.
INSERT INTO events (id, tenant_id, type, payload, coalesce_key, consumer, broadcast, created_at, trace_context, ordering_key)
SELECT e.id, e.tenant_id, e.type, e.payload::json, nullif(e.coalesce_key, ''),
       CASE WHEN e.has_consumer THEN e.consumer END, e.broadcast, e.created_at, nullif(e.trace_context, '')::jsonb,
       nullif(e.ordering_key, '')
FROM (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@types::text[]) AS type,
           unnest(@payloads::text[]) AS payload, unnest(@coalesce_keys::text[]) AS coalesce_key,
           unnest(@consumers::text[]) AS consumer, unnest(@has_consumers::bool[]) AS has_consumer,
           unnest(@broadcasts::bool[]) AS broadcast, unnest(@created_ats::timestamptz[]) AS created_at,
           unnest(@trace_contexts::text[]) AS trace_context, unnest(@ordering_keys::text[]) AS ordering_key
) e;

-- name: InsertRoutedEvents :many
-- Stores a group of events that carry neither a coalesce key nor a
-- consumer, routes them and makes their deliveries, all in one statement
-- (fanout.insertRouted): what InsertEvents, SubscriptionsForEvents and
-- InsertDeliveries do in a transaction of their own, in one round trip.
-- Each event reaches the subscriptions holding one of the patterns that
-- could match its type (pattern_events and patterns pair each event with
-- them, sluice.CandidatePatterns; found by key in subscription_patterns)
-- whose endpoint is enabled and the
-- tenant's own, or any, for a broadcast. (Events addressed to a consumer
-- go through the transaction, whose routing finds a consumer's endpoints
-- by their index; here each would be read past every other consumer's
-- endpoint on the same type.) A subscription with a filter is reached
-- only by the events whose payload matches its compiled filter
-- (filter.Filter.JSONPath); the payload of an event whose tenant has a
-- subscription with a filter (filtering: one index scan of
-- subscriptions_filtered_idx, which holds only filtered subscriptions, once
-- per statement) is read as jsonb once, as the event is inserted, and no other payload is: a tenant
-- without filters pays nothing for them. A sealed payload (a JSON string,
-- secretbox.Payloads) that meets a filter fails the statement with
-- SQLSTATE SL002 (sluice_sealed_payload): Postgres cannot read it, and
-- the caller stores the group where Go matches it. filtering reads the
-- subscriptions in the statement's snapshot, as the routing does, so a
-- filter added meanwhile is seen by both or neither. It locks those
-- endpoints FOR KEY SHARE, as
-- SubscriptionsForEvents does. Each (event, endpoint) gets one delivery,
-- named by sluice_delivery_id, inserted with no ON CONFLICT: its event
-- is new, or the statement fails on events_pkey first (a try stored
-- before: ingest.storedBefore), and an arbiter's check and speculative
-- insertion would cost every delivery a lock and a WAL record. A group
-- that would make more than max_deliveries fails with SQLSTATE SL001 (sluice_within_inline_limit)
-- and stores nothing. It returns each delivery made, with its endpoint and
-- when it came due: with the event, all a dispatch run claims of it, so
-- ingest can hand it to a run lingering in this process (dispatch.Nudger.Hand).
-- trace_contexts and ordering_keys are as InsertEvents has them. A
-- delivery to a FIFO endpoint gets its line and place (00030_fifo.sql)
-- from the endpoint row it locked.
WITH filtering AS (
    SELECT s.tenant_id FROM subscriptions s WHERE s.tenant_id = ANY(@tenant_ids::uuid[]) AND s.filter_path IS NOT NULL
), ev AS (
    INSERT INTO events (id, tenant_id, type, payload, broadcast, created_at, trace_context, ordering_key)
    SELECT e.id, e.tenant_id, e.type, e.payload::json, e.broadcast, e.created_at, nullif(e.trace_context, '')::jsonb,
           nullif(e.ordering_key, '')
    FROM (
        SELECT unnest(@ids::uuid[]) AS id, unnest(@tenant_ids::uuid[]) AS tenant_id, unnest(@types::text[]) AS type,
               unnest(@payloads::text[]) AS payload, unnest(@broadcasts::bool[]) AS broadcast,
               unnest(@created_ats::timestamptz[]) AS created_at, unnest(@trace_contexts::text[]) AS trace_context,
               unnest(@ordering_keys::text[]) AS ordering_key
    ) e
    RETURNING id, tenant_id, type, broadcast,
              CASE WHEN tenant_id = ANY(ARRAY(SELECT f.tenant_id FROM filtering f)) THEN payload::jsonb END AS doc,
              ordering_key
), candidate AS (
    SELECT unnest(@pattern_events::uuid[]) AS event_id, unnest(@patterns::text[]) AS pattern
), target AS (
    SELECT ev.id AS event_id, ev.tenant_id, ev.type, e.id AS endpoint_id,
           CASE WHEN e.ordering = 'fifo' THEN coalesce(ev.ordering_key, '') END AS ordering_key
    FROM ev
    JOIN candidate c ON c.event_id = ev.id
    CROSS JOIN LATERAL (SELECT sp.subscription_id FROM subscription_patterns sp
                        WHERE sp.tenant_id = ev.tenant_id AND sp.pattern = c.pattern
                        OFFSET 0) sp -- a probe per pattern, never the tenant's every row
    JOIN subscriptions s ON s.id = sp.subscription_id
    JOIN endpoints e ON e.id = s.endpoint_id
    WHERE NOT e.disabled AND (ev.broadcast OR e.consumer IS NULL)
      AND (s.filter_path IS NULL OR CASE WHEN jsonb_typeof(ev.doc) = 'string' THEN sluice_sealed_payload()
                                         ELSE jsonb_path_match(ev.doc, s.filter_path, '{}', true) END)
    FOR KEY SHARE OF e
), pair AS (
    SELECT DISTINCT event_id, tenant_id, type, endpoint_id, ordering_key FROM target
), within AS (
    SELECT sluice_within_inline_limit(count(*), @max_deliveries::bigint) AS ok FROM pair
)
INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at, ordering_key, fifo_position)
SELECT sluice_delivery_id(p.event_id, p.endpoint_id), p.tenant_id, p.event_id, p.endpoint_id, p.type, now(),
       p.ordering_key, CASE WHEN p.ordering_key IS NOT NULL THEN p.event_id END
FROM pair p, within w
WHERE w.ok
RETURNING id, event_id, endpoint_id, next_attempt_at;
