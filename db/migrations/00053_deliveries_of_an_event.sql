-- +goose Up
-- The deliveries of an event are found through two partial indexes instead
-- of one index of every delivery: its first deliveries through
-- deliveries_event_endpoint_idx (replayed_from IS NULL), its replays
-- through deliveries_replay_event_idx. A read of all of them by a value
-- (a parameter, or the outer row's in a subquery Postgres runs per row)
-- says "d.event_id = … AND (d.replayed_from IS NULL OR d.replayed_from IS
-- NOT NULL)", which Postgres answers with both indexes (a BitmapOr). An
-- EXISTS or NOT EXISTS that Postgres turns into a join is written as two,
-- one per index: it builds a BitmapOr from a row's own conditions, never
-- from a join's, and would read every delivery instead.
--
-- So a delivery that is never replayed is kept in one index fewer: one
-- entry fewer when it is made, and one fewer each time its status is
-- recorded (a status update is never HOT: the claim index's predicate
-- reads the status). And deliveries_event_id_idx no longer tempts the
-- plan of RecordOutcomes: a plan made while a week's partition was nearly
-- empty read it by the week's event_id range, every delivery of the week,
-- for each one recorded, until an ANALYZE of the partition replanned it.
-- The primary key (id, event_id) is now the only index that serves that
-- lookup.
--
-- The previous release works on this schema (its queries are the same
-- but for these conditions), but its reads of an event's deliveries by
-- event_id alone have no index while it still runs during an upgrade:
-- they read the week's partition until its processes are replaced.
DROP INDEX deliveries_event_id_idx;
CREATE INDEX deliveries_replay_event_idx ON deliveries (event_id, endpoint_id) WHERE replayed_from IS NOT NULL;

CREATE OR REPLACE FUNCTION sluice_kept_event(tenant uuid, event_id uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM deliveries d
                   WHERE d.event_id = sluice_kept_event.event_id AND d.replayed_from IS NULL
                     AND d.tenant_id = tenant
                     AND d.status <> 'delivered'
                     AND (d.status <> 'dead' OR d.updated_at >= sluice_dead_from(tenant)))
        OR EXISTS (SELECT 1 FROM deliveries d
                   WHERE d.event_id = sluice_kept_event.event_id AND d.replayed_from IS NOT NULL
                     AND d.tenant_id = tenant
                     AND d.status <> 'delivered'
                     AND (d.status <> 'dead' OR d.updated_at >= sluice_dead_from(tenant)));

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_expire_kept(delivered_before timestamptz, dead_before timestamptz, max_rows integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    ids    uuid[];
    events uuid[];
BEGIN
    WITH gone AS (
        DELETE FROM deliveries_kept
        WHERE id IN (
            SELECT id FROM deliveries_kept WHERE status = 'delivered' AND updated_at < delivered_before
            UNION ALL
            SELECT id FROM deliveries_kept WHERE status = 'dead' AND updated_at < dead_before
            LIMIT max_rows
        )
        RETURNING id, event_id
    )
    SELECT array_agg(id), array_agg(DISTINCT event_id) INTO ids, events FROM gone;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM delivery_attempts_kept WHERE delivery_id = ANY (ids);
    DELETE FROM events_kept e
    WHERE e.id = ANY (events)
      AND NOT EXISTS (SELECT 1 FROM deliveries_kept d WHERE d.event_id = e.id AND d.replayed_from IS NULL)
      AND NOT EXISTS (SELECT 1 FROM deliveries_kept d WHERE d.event_id = e.id AND d.replayed_from IS NOT NULL);
    RETURN cardinality(ids);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_expire_kept(delivered_before timestamptz, dead_before timestamptz, max_rows integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    ids    uuid[];
    events uuid[];
BEGIN
    WITH gone AS (
        DELETE FROM deliveries_kept
        WHERE id IN (
            SELECT id FROM deliveries_kept WHERE status = 'delivered' AND updated_at < delivered_before
            UNION ALL
            SELECT id FROM deliveries_kept WHERE status = 'dead' AND updated_at < dead_before
            LIMIT max_rows
        )
        RETURNING id, event_id
    )
    SELECT array_agg(id), array_agg(DISTINCT event_id) INTO ids, events FROM gone;
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM delivery_attempts_kept WHERE delivery_id = ANY (ids);
    DELETE FROM events_kept e
    WHERE e.id = ANY (events) AND NOT EXISTS (SELECT 1 FROM deliveries_kept d WHERE d.event_id = e.id);
    RETURN cardinality(ids);
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION sluice_kept_event(tenant uuid, event_id uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM deliveries d
                   WHERE d.event_id = sluice_kept_event.event_id AND d.tenant_id = tenant
                     AND d.status <> 'delivered'
                     AND (d.status <> 'dead' OR d.updated_at >= sluice_dead_from(tenant)));

DROP INDEX deliveries_replay_event_idx;
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
