-- name: InsertDeliveries :many
-- A delivery to a FIFO endpoint gets its line and place (00030_fifo.sql):
-- the endpoint's ordering is read here, after routing locked its row.
INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, coalesce_key, next_attempt_at,
                        ordering_key, fifo_position)
SELECT d.id, @tenant_id, d.event_id, d.endpoint_id, d.event_type, nullif(d.coalesce_key, ''), now(),
       CASE WHEN ep.ordering = 'fifo' THEN d.ordering_key END, CASE WHEN ep.ordering = 'fifo' THEN d.event_id END
FROM (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@event_ids::uuid[]) AS event_id, unnest(@endpoint_ids::uuid[]) AS endpoint_id,
           unnest(@event_types::text[]) AS event_type, unnest(@coalesce_keys::text[]) AS coalesce_key,
           unnest(@ordering_keys::text[]) AS ordering_key
) d
JOIN endpoints ep ON ep.id = d.endpoint_id
ON CONFLICT (event_id, endpoint_id) WHERE replayed_from IS NULL DO NOTHING
RETURNING endpoint_id;

-- name: CoalesceDelivery :one
-- Points a queued, never-attempted delivery of an older event with the same
-- endpoint, type and coalesce key at a newer event, so the newer payload
-- replaces the older.
UPDATE deliveries SET event_id = @event_id, updated_at = now()
WHERE id = (
    SELECT d.id FROM deliveries d
    WHERE d.endpoint_id = @endpoint_id AND d.coalesce_key = @coalesce_key AND d.event_type = @event_type
      AND d.status = 'pending' AND d.attempt_count = 0 AND d.event_id < @event_id
      -- A poll endpoint's delivery with a position may have been read: an
      -- old cursor must answer the same page again (00031_poll_delivery.sql).
      AND d.poll_position IS NULL
      -- Within the event's own week: moving a delivery to another week's
      -- partition would be a delete and an insert.
      AND d.event_id >= sluice_week_lo(@event_id)
    ORDER BY d.id
    LIMIT 1
    FOR UPDATE
)
RETURNING id;

-- name: NewerCoalescedExists :one
-- Reports whether a newer event with the same coalesce key already has a
-- delivery to the endpoint, which supersedes this one (a late or re-run
-- fan-out of an older event).
SELECT EXISTS (
    SELECT 1 FROM deliveries d
    WHERE d.endpoint_id = @endpoint_id AND d.coalesce_key = @coalesce_key AND d.event_type = @event_type
      AND d.event_id > @event_id
);

-- name: GetDelivery :one
SELECT * FROM deliveries WHERE tenant_id = @tenant_id AND id = @id
  AND sluice_kept_delivery(status, id, updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)));

-- name: ListDeliveries :many
-- A page of a tenant's deliveries matching the filters given (NULL for
-- none), newest first: by created_at, then id (00041_search.sql). The time
-- range and the page's cursor (the last id of the page before, whose
-- created_at is looked up, or read from the id when the delivery is gone)
-- are the bounds of one scan of deliveries_tenant_created_idx in each
-- week's partition, never a filter over the tenant's rows. The upper bound
-- is one row comparison, until or the cursor, whichever is lower: given
-- both as two bounds, Postgres started its backward scan at the cursor's
-- (the end of time on a first page) and read every row from there down to
-- until. status_min and status_max bound the status code of a delivery's
-- last attempt, found by one probe of its attempts' index in its own week.
SELECT d.* FROM deliveries d
WHERE d.tenant_id = @tenant_id
  AND d.created_at >= coalesce(sqlc.narg(since)::timestamptz, '-infinity')
  AND (d.created_at, d.id) < (
      least(coalesce(sqlc.narg(until)::timestamptz, 'infinity'),
            coalesce((SELECT c.created_at FROM deliveries c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                     to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')),
      CASE WHEN coalesce((SELECT c.created_at FROM deliveries c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                         to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')
                < coalesce(sqlc.narg(until)::timestamptz, 'infinity')
           THEN sqlc.narg(after)::uuid ELSE '00000000-0000-0000-0000-000000000000' END)
  AND sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
  AND (sqlc.narg(endpoint_id)::uuid IS NULL OR d.endpoint_id = sqlc.narg(endpoint_id)::uuid)
  AND (sqlc.narg(event_id)::uuid IS NULL OR d.event_id = sqlc.narg(event_id)::uuid)
  AND (sqlc.narg(status)::text IS NULL OR d.status = sqlc.narg(status)::text)
  AND (sqlc.narg(event_type)::text IS NULL OR d.event_type = sqlc.narg(event_type)::text)
  AND (sqlc.narg(type_prefix)::text IS NULL OR starts_with(d.event_type, sqlc.narg(type_prefix)::text))
  AND (sqlc.narg(consumer)::text IS NULL OR d.endpoint_id IN (
       SELECT e.id FROM endpoints e
       WHERE e.tenant_id = d.tenant_id AND e.consumer = sqlc.narg(consumer)::text))
  AND (sqlc.narg(status_min)::integer IS NULL OR (
       SELECT a.status_code FROM delivery_attempts a
       WHERE a.delivery_id = d.id AND a.event_id = d.event_id
       ORDER BY a.id DESC
       LIMIT 1) BETWEEN sqlc.narg(status_min)::integer AND sqlc.narg(status_max)::integer)
ORDER BY d.created_at DESC, d.id DESC
LIMIT @max_rows;

-- name: ListEndpointsDead :many
-- A page of the dead deliveries of one endpoint, or of a consumer's
-- endpoints (a portal's dead letters), matching the filters given, newest
-- first as ListDeliveries has them. For each endpoint, one scan of its
-- dead deliveries in deliveries_endpoint_dead_created_idx, bounded as
-- ListDeliveries bounds its scan and stopping at a page; then the pages
-- merged. ListDeliveries would read every delivery of the tenant in the
-- range to find the few dead ones of a consumer: a day of 770,000 for 50
-- of them.
SELECT d.id, d.tenant_id, d.event_id, d.endpoint_id, d.event_type, d.coalesce_key, d.status, d.attempt_count,
       d.failure_count, d.next_attempt_at, d.replayed_from, d.created_at, d.updated_at, d.ordering_key,
       d.fifo_position, d.fifo_sequence, d.poll_position
FROM endpoints e
CROSS JOIN LATERAL (
    SELECT d.* FROM deliveries d
    WHERE d.endpoint_id = e.id AND d.status = 'dead' AND d.tenant_id = @tenant_id
      AND d.created_at >= coalesce(sqlc.narg(since)::timestamptz, '-infinity')
      AND (d.created_at, d.id) < (
          least(coalesce(sqlc.narg(until)::timestamptz, 'infinity'),
                coalesce((SELECT c.created_at FROM deliveries c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                         to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')),
          CASE WHEN coalesce((SELECT c.created_at FROM deliveries c WHERE c.id = sqlc.narg(after)::uuid AND c.tenant_id = @tenant_id),
                             to_timestamp(sluice_uuid_ms(sqlc.narg(after)::uuid) / 1000.0), 'infinity')
                    < coalesce(sqlc.narg(until)::timestamptz, 'infinity')
               THEN sqlc.narg(after)::uuid ELSE '00000000-0000-0000-0000-000000000000' END)
      AND sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
      AND (sqlc.narg(event_id)::uuid IS NULL OR d.event_id = sqlc.narg(event_id)::uuid)
      AND (sqlc.narg(event_type)::text IS NULL OR d.event_type = sqlc.narg(event_type)::text)
      AND (sqlc.narg(type_prefix)::text IS NULL OR starts_with(d.event_type, sqlc.narg(type_prefix)::text))
      AND (sqlc.narg(status_min)::integer IS NULL OR (
           SELECT a.status_code FROM delivery_attempts a
           WHERE a.delivery_id = d.id AND a.event_id = d.event_id
           ORDER BY a.id DESC
           LIMIT 1) BETWEEN sqlc.narg(status_min)::integer AND sqlc.narg(status_max)::integer)
    ORDER BY d.created_at DESC, d.id DESC
    LIMIT @max_rows
) d
WHERE e.tenant_id = @tenant_id
  AND (sqlc.narg(endpoint_id)::uuid IS NULL OR e.id = sqlc.narg(endpoint_id)::uuid)
  AND (sqlc.narg(consumer)::text IS NULL OR e.consumer = sqlc.narg(consumer)::text)
ORDER BY d.created_at DESC, d.id DESC
LIMIT @max_rows;

-- name: DeliveriesForEvent :many
-- Its first deliveries and its replays, each through its own index
-- (00053_deliveries_of_an_event.sql).
SELECT * FROM deliveries WHERE tenant_id = @tenant_id AND event_id = @event_id
  AND (replayed_from IS NULL OR replayed_from IS NOT NULL)
  AND sluice_kept_delivery(status, id, updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
ORDER BY id;

-- name: AttemptsForDelivery :many
SELECT * FROM delivery_attempts WHERE delivery_id = @delivery_id ORDER BY id;

-- name: LockEndpointReplays :exec
-- Serialises replays and retries of one endpoint's deliveries until the
-- transaction ends, so two identical bulk replays cannot both see "nothing
-- queued yet" and both queue. The two-key form keeps it apart from the
-- one-key (bigint) locks of package lease and of River.
SELECT pg_advisory_xact_lock(1936483683, hashtext(@endpoint_id::text));

-- name: LockEndpointKeyShare :one
-- Takes the KEY SHARE lock a delivery insert takes, for a write that makes
-- a delivery due without inserting one: the dispatcher's final check
-- (FOR UPDATE) then either sees the write or waits for it.
SELECT id FROM endpoints WHERE id = @id FOR KEY SHARE;

-- name: QueuedDeliveryOfEvent :one
-- A delivery of the event to the endpoint that is still queued, or staged
-- by an unfinished bulk replay, if any.
SELECT d.id FROM deliveries d
WHERE d.event_id = @event_id AND d.endpoint_id = @endpoint_id
  AND (d.status IN ('pending', 'failed')
       OR d.id IN (SELECT unnest(r.delivery_ids) FROM replay_requests r WHERE r.endpoint_id = @endpoint_id))
LIMIT 1;

-- name: ReplayDelivery :one
-- A replay to a FIFO endpoint goes to the back of its line: its place is
-- its own id, made now. The endpoint row is locked FOR KEY SHARE, as a
-- delivery's insert does, before its ordering is read (LockEndpointOrdering).
INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, coalesce_key, next_attempt_at, replayed_from,
                        ordering_key, fifo_position)
SELECT @id, d.tenant_id, d.event_id, d.endpoint_id, d.event_type, NULL, now(), d.id,
       CASE WHEN ep.ordering = 'fifo' THEN coalesce(ev.ordering_key, '') END,
       CASE WHEN ep.ordering = 'fifo' THEN @id::uuid END
FROM deliveries d
JOIN endpoints ep ON ep.id = d.endpoint_id
JOIN events ev ON ev.id = d.event_id
WHERE d.tenant_id = @tenant_id AND d.id = @source_id AND d.status IN ('delivered', 'dead')
  AND sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
FOR KEY SHARE OF ep
RETURNING *;

-- name: RetryDelivery :one
-- Makes a queued delivery due now; its attempts and retry budget stay.
UPDATE deliveries SET next_attempt_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status IN ('pending', 'failed')
RETURNING *;

-- name: StageReplay :one
-- Chooses, for each event, the newest delivery to the endpoint when it has
-- the status and was created in the window: never an older one beside it
-- (so never both a delivery and its replays), and nothing of an event that
-- still has a delivery queued to the endpoint, or staged by an unfinished
-- bulk replay (so a second identical call queues nothing while the first
-- one's replays wait). Records their ids as a replay request, in one
-- statement whatever their number, and returns how many; no row (and no
-- request) when none matches. ReplayStaged then replays them.
--
-- The deliveries are read as CountReplayable reads them: a branch per
-- status, its status a literal, so dead ones come from
-- deliveries_endpoint_dead_idx alone, whatever the plan.
--
-- The other deliveries of an event are looked up by event_id alone, its
-- first deliveries and its replays each through its own partial index
-- (00053_deliveries_of_an_event.sql), so in two NOT EXISTS: Postgres
-- reads two partial indexes together (a BitmapOr) for a row's own
-- conditions, never for a join's. "IS NOT DISTINCT FROM" (the same as =
-- here, both are NOT NULL) keeps the planner from also scanning the
-- endpoint's whole index for each row, the plan it chooses without
-- statistics, which is quadratic in the number of deliveries.
INSERT INTO replay_requests (id, tenant_id, endpoint_id, status, since, until, delivery_ids, queued)
SELECT @id::uuid, @tenant_id::uuid, @endpoint_id::uuid, @status::text,
       sqlc.narg(since)::timestamptz, sqlc.narg(until)::timestamptz, array_agg(d.id), count(*)
FROM (
    SELECT d.id, d.event_id, d.endpoint_id, d.status, d.updated_at, d.created_at FROM deliveries d
    WHERE @status::text = 'dead' AND d.status = 'dead' AND d.endpoint_id = @endpoint_id::uuid AND d.tenant_id = @tenant_id::uuid
    UNION ALL
    SELECT d.id, d.event_id, d.endpoint_id, d.status, d.updated_at, d.created_at FROM deliveries d
    WHERE @status::text = 'delivered' AND d.status = 'delivered' AND d.endpoint_id = @endpoint_id::uuid AND d.tenant_id = @tenant_id::uuid
) d
WHERE sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id::uuid)), (SELECT sluice_dead_from(@tenant_id::uuid)))
  AND (sqlc.narg(since)::timestamptz IS NULL OR d.created_at >= sqlc.narg(since)::timestamptz)
  AND (sqlc.narg(until)::timestamptz IS NULL OR d.created_at < sqlc.narg(until)::timestamptz)
  AND NOT EXISTS (
      SELECT 1 FROM deliveries o
      WHERE o.event_id = d.event_id AND o.replayed_from IS NULL
        AND o.endpoint_id IS NOT DISTINCT FROM d.endpoint_id
        AND (o.id > d.id OR o.status IN ('pending', 'failed'))
  )
  AND NOT EXISTS (
      SELECT 1 FROM deliveries o
      WHERE o.event_id = d.event_id AND o.replayed_from IS NOT NULL
        AND o.endpoint_id IS NOT DISTINCT FROM d.endpoint_id
        AND (o.id > d.id OR o.status IN ('pending', 'failed'))
  )
  AND d.id NOT IN (SELECT unnest(r.delivery_ids) FROM replay_requests r WHERE r.endpoint_id = @endpoint_id::uuid)
HAVING count(*) > 0
RETURNING queued;

-- name: CountReplayable :one
-- How many deliveries StageReplay would choose now, counted up to @most:
-- run with replay.CountSettings, it reads no more than @most of them. Each
-- status has its own branch, its status a literal, so that a plan made
-- without knowing @status still reads dead ones from
-- deliveries_endpoint_dead_idx alone (the endpoint's only), and runs only
-- the branch of @status.
SELECT count(*) FROM (
    SELECT 1 FROM (
        SELECT d.id, d.event_id, d.endpoint_id, d.status, d.updated_at, d.created_at FROM deliveries d
        WHERE @status::text = 'dead' AND d.status = 'dead' AND d.endpoint_id = @endpoint_id AND d.tenant_id = @tenant_id
        UNION ALL
        SELECT d.id, d.event_id, d.endpoint_id, d.status, d.updated_at, d.created_at FROM deliveries d
        WHERE @status::text = 'delivered' AND d.status = 'delivered' AND d.endpoint_id = @endpoint_id AND d.tenant_id = @tenant_id
    ) d
    WHERE sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
      AND (sqlc.narg(since)::timestamptz IS NULL OR d.created_at >= sqlc.narg(since)::timestamptz)
      AND (sqlc.narg(until)::timestamptz IS NULL OR d.created_at < sqlc.narg(until)::timestamptz)
      AND NOT EXISTS (
          SELECT 1 FROM deliveries o
          WHERE o.event_id = d.event_id AND o.replayed_from IS NULL
            AND o.endpoint_id IS NOT DISTINCT FROM d.endpoint_id
            AND (o.id > d.id OR o.status IN ('pending', 'failed'))
      )
      AND NOT EXISTS (
          SELECT 1 FROM deliveries o
          WHERE o.event_id = d.event_id AND o.replayed_from IS NOT NULL
            AND o.endpoint_id IS NOT DISTINCT FROM d.endpoint_id
            AND (o.id > d.id OR o.status IN ('pending', 'failed'))
      )
      AND d.id NOT IN (SELECT unnest(r.delivery_ids) FROM replay_requests r WHERE r.endpoint_id = @endpoint_id)
    LIMIT @most
) replayable;

-- name: LockReplayRequest :one
-- A replay request's progress, locked until the transaction ends, so two
-- runs of its job take turns and neither replays a chunk twice.
SELECT done, queued FROM replay_requests WHERE id = @id FOR UPDATE;

-- name: ReplayStaged :execrows
-- Replays the staged deliveries at positions first..last (from 1) of a
-- replay request; one deleted meanwhile (by retention, say) is skipped.
-- A replay to a FIFO endpoint goes to the back of its line, as
-- ReplayDelivery says; replays made in the same millisecond take their
-- places in no particular order.
INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at, replayed_from,
                        ordering_key, fifo_position)
SELECT n.id, n.tenant_id, n.event_id, n.endpoint_id, n.event_type, now(), n.replayed_from,
       CASE WHEN n.fifo THEN n.ordering_key END, CASE WHEN n.fifo THEN n.id END
FROM (
    SELECT sluice_uuidv7() AS id, d.tenant_id, d.event_id, d.endpoint_id, d.event_type, d.id AS replayed_from,
           ep.ordering = 'fifo' AS fifo, coalesce(ev.ordering_key, '') AS ordering_key
    FROM replay_requests r
    CROSS JOIN LATERAL unnest(r.delivery_ids[@first::int:@last::int]) AS s (id)
    JOIN deliveries d ON d.id = s.id AND d.endpoint_id = r.endpoint_id
    JOIN endpoints ep ON ep.id = r.endpoint_id
    JOIN events ev ON ev.id = d.event_id
    WHERE r.id = @request_id
    FOR KEY SHARE OF ep
) n;

-- name: AdvanceReplayRequest :exec
UPDATE replay_requests SET done = @done WHERE id = @id;

-- name: DeleteReplayRequest :exec
DELETE FROM replay_requests WHERE id = @id;

-- name: NewestReplays :many
-- The newest replay of each of these deliveries that has one.
SELECT DISTINCT ON (replayed_from) replayed_from::uuid AS source_id, id, status
FROM deliveries
WHERE replayed_from = ANY(@source_ids::uuid[])
ORDER BY replayed_from, id DESC;

-- name: EnsureWeekPartitions :one
-- See sluice_ensure_week in 00014_time_partitions.sql.
SELECT sluice_ensure_week(@at::timestamptz)::boolean AS created;

-- name: PartitionWeeks :many
-- The weeks that have partitions, by their Mondays, oldest first.
SELECT week::date FROM sluice_weeks() AS week ORDER BY 1;

-- name: RetireWeek :one
-- See sluice_retire_week in 00018_retired_weeks.sql.
SELECT sluice_retire_week(@week::date)::boolean AS retired;

-- name: KeepRetired :one
-- See sluice_keep_retired in 00018_retired_weeks.sql.
SELECT sluice_keep_retired(@dead_before::timestamptz)::bigint AS kept;

-- name: DropExpired :one
-- See sluice_drop_expired in 00019_expired_keys_first.sql (00018_retired_weeks.sql
-- for the steps before it); '' when none is left.
SELECT coalesce(sluice_drop_expired(), '')::text AS dropped;

-- name: ExpireKept :one
-- See sluice_expire_kept in 00014_time_partitions.sql.
SELECT sluice_expire_kept(@delivered_before::timestamptz, @dead_before::timestamptz, @max_rows::integer)::integer AS deleted;

-- name: FanOutCounts :many
-- How many endpoints each of a page of events went to (its deliveries,
-- replays left out), of one consumer's endpoints when consumer is set:
-- one statement for the events list. The events' ids let Postgres read
-- only their weeks' partitions. A delivery past the tenant's own
-- retention is not counted, as no read shows it (an old event is listed
-- while one of its deliveries is kept: 00042_tenant_retention.sql).
SELECT d.event_id, count(*)::bigint AS endpoints
FROM deliveries d
WHERE d.tenant_id = @tenant_id AND d.event_id = ANY(@event_ids::uuid[]) AND d.replayed_from IS NULL
  AND sluice_kept_delivery(d.status, d.id, d.updated_at, (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
  AND (sqlc.narg(consumer)::text IS NULL OR d.endpoint_id IN (
       SELECT e.id FROM endpoints e
       WHERE e.tenant_id = d.tenant_id AND e.consumer = sqlc.narg(consumer)::text))
GROUP BY d.event_id;
