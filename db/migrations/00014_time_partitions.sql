-- +goose Up

-- Events, deliveries and attempts are partitioned by the week of their
-- event (seven days from Monday 00:00 UTC), so retention drops a whole week
-- at once (DROP TABLE) instead of deleting rows: its cost does not grow
-- with the rows removed. Event ids are UUIDv7, whose first 48 bits are the
-- Unix time in milliseconds, so a week is a range of ids. events is
-- partitioned by id; deliveries and delivery_attempts by event_id, with the
-- same bounds: an event, its deliveries (replays included) and their
-- attempts always share a week, and go together.
--
-- Why weeks, not days: a query that cannot be pruned to one partition (a
-- claim reads an endpoint's queue in every partition) plans, locks and
-- probes every partition and each of its indexes. With the default
-- SLUICE_RETENTION of 14 days, days would mean 19 partitions a table and
-- cost end-to-end throughput about a sixth; weeks mean 3 (this week and
-- the two before), and a fourth two days a week (the next). The price is
-- that a delivered delivery is kept up to a week past SLUICE_RETENTION.
--
-- Each table also has a DEFAULT partition, *_kept. Before a week is
-- dropped, what must outlive it (deliveries still queued, dead deliveries
-- kept for replay, and their attempts and events) is moved there: once a
-- week is detached its range is no longer covered, so its rows route to
-- the default. Retention then deletes from *_kept row by row, at a cost
-- in proportion to dead and late deliveries only. Rows whose week has no
-- partition yet also land in *_kept, and move into their week's partition
-- when it is created.
--
-- The retention job (internal/retention) creates each week's partitions
-- two days ahead with sluice_ensure_week and drops expired weeks with
-- sluice_drop_week; this migration creates them for every week that has
-- events, and for the week two days from now.
--
-- No foreign keys run between these three tables: one into a partitioned
-- table would make every detach scan the referencing table. What they did
-- is done where rows go: retention moves and drops the three together,
-- and deleting an endpoint or a consumer deletes its attempts. deliveries
-- keeps its foreign keys to endpoints and tenants: the KEY SHARE lock the
-- endpoint key takes is what orders fan-out with a finishing dispatch run
-- (see 00002_events.sql).

-- sluice_uuid_ms is the Unix time in milliseconds of a UUIDv7.
CREATE FUNCTION sluice_uuid_ms(id uuid) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint;

-- sluice_uuid_at is the smallest UUIDv7 of a millisecond: a partition bound.
CREATE FUNCTION sluice_uuid_at(ms bigint) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (lpad(to_hex(ms), 12, '0') || '00000000000000000000')::uuid;

-- sluice_week_start_ms is the start of the week (Monday 00:00 UTC) of a
-- Unix time in milliseconds. 1970-01-05 was a Monday.
CREATE FUNCTION sluice_week_start_ms(ms bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (ms - 345600000) / 604800000 * 604800000 + 345600000;

-- sluice_week_lo and sluice_week_hi bound the partition of an id. A query
-- that knows a delivery's event id says "event_id >= sluice_week_lo(x) AND
-- event_id < sluice_week_hi(x)", and Postgres probes that week's partition
-- (and *_kept) instead of every week's.
CREATE FUNCTION sluice_week_lo(id uuid) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN sluice_uuid_at(sluice_week_start_ms(sluice_uuid_ms(id)));
CREATE FUNCTION sluice_week_hi(id uuid) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN sluice_uuid_at(sluice_week_start_ms(sluice_uuid_ms(id)) + 604800000);

-- sluice_ensure_week creates the partitions of the week holding t, named
-- by its Monday (events_20261123), moving into them any rows of the week
-- that landed in *_kept meanwhile, and reports whether it created them.
-- All three or none: it runs in its caller's transaction.
-- +goose StatementBegin
CREATE FUNCTION sluice_ensure_week(t timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    start  bigint := sluice_week_start_ms((extract(epoch FROM t) * 1000)::bigint);
    lo     uuid := sluice_uuid_at(start);
    hi     uuid := sluice_uuid_at(start + 604800000);
    suffix text := to_char(to_timestamp(start / 1000) AT TIME ZONE 'UTC', 'YYYYMMDD');
    tbl    text;
    col    text;
BEGIN
    IF to_regclass('events_' || suffix) IS NOT NULL THEN
        RETURN false;
    END IF;
    FOREACH tbl IN ARRAY ARRAY['events', 'deliveries', 'delivery_attempts'] LOOP
        col := CASE tbl WHEN 'events' THEN 'id' ELSE 'event_id' END;
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', tbl || '_' || suffix, tbl);
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       tbl || '_kept', col, lo, col, hi, tbl || '_' || suffix);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', tbl, tbl || '_' || suffix, lo, hi);
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- sluice_drop_week drops the partitions of the week that starts on the
-- Monday week. First it moves what must outlive the week into *_kept:
-- deliveries still queued, dead ones that died at or after dead_before,
-- their attempts and their events. It
-- finds them through partial indexes, so its cost follows what it keeps,
-- not what it drops. It returns how many deliveries it kept, or NULL when
-- the week has no partitions. It locks the three tables for its length (a
-- detach needs that), and tenants and endpoints against writes; its caller
-- bounds the wait with lock_timeout.
-- +goose StatementBegin
CREATE FUNCTION sluice_drop_week(week date, dead_before timestamptz) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    suffix  text := to_char(week, 'YYYYMMDD');
    seqscan text := current_setting('enable_seqscan');
    kept    bigint;
BEGIN
    IF to_regclass('events_' || suffix) IS NULL THEN
        RETURN NULL;
    END IF;
    -- Every lock the detaches take, taken first: their foreign keys' tables
    -- (dropping a partition's foreign key locks the table it references),
    -- then the three. Sluice's own statements take these tables in more
    -- than one order, so a wait here can be a deadlock that Postgres would
    -- only break after deadlock_timeout (1 s), holding up delivery all that
    -- time; the caller's lock_timeout (20 ms) gives up first, and the job
    -- tries again shortly.
    LOCK TABLE tenants, endpoints IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE deliveries, events, delivery_attempts IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('ALTER TABLE events DETACH PARTITION %I', 'events_' || suffix);
    EXECUTE format('ALTER TABLE deliveries DETACH PARTITION %I', 'deliveries_' || suffix);
    EXECUTE format('ALTER TABLE delivery_attempts DETACH PARTITION %I', 'delivery_attempts_' || suffix);
    -- The few rows kept are reached through the partial indexes even when
    -- the week's statistics would make a scan look cheaper.
    PERFORM set_config('enable_seqscan', 'off', true);
    EXECUTE format($sql$
        WITH kept AS (
            INSERT INTO deliveries
            SELECT * FROM %1$I WHERE status IN ('pending', 'failed')
            UNION ALL
            SELECT * FROM %1$I WHERE status = 'dead' AND updated_at >= %4$L
            RETURNING id, event_id
        ), kept_attempts AS (
            INSERT INTO delivery_attempts
            SELECT a.* FROM %2$I a WHERE a.delivery_id IN (SELECT id FROM kept)
        ), kept_events AS (
            INSERT INTO events
            SELECT e.* FROM %3$I e WHERE e.id IN (SELECT event_id FROM kept)
        )
        SELECT count(*) FROM kept
        $sql$, 'deliveries_' || suffix, 'delivery_attempts_' || suffix, 'events_' || suffix, dead_before) INTO kept;
    PERFORM set_config('enable_seqscan', seqscan, true);
    EXECUTE format('DROP TABLE %I, %I, %I', 'delivery_attempts_' || suffix, 'deliveries_' || suffix, 'events_' || suffix);
    RETURN kept;
END
$$;
-- +goose StatementEnd

-- sluice_expire_kept deletes up to max_rows deliveries from deliveries_kept
-- that are past their retention (delivered before delivered_before, dead
-- before dead_before), with their attempts and the events no other kept
-- delivery needs, and returns how many deliveries it deleted.
-- +goose StatementBegin
CREATE FUNCTION sluice_expire_kept(delivered_before timestamptz, dead_before timestamptz, max_rows integer)
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

-- sluice_weeks lists the weeks that have partitions, by their Mondays.
-- +goose StatementBegin
CREATE FUNCTION sluice_weeks() RETURNS SETOF date LANGUAGE sql STABLE AS $$
    SELECT to_date(substr(c.relname, 8), 'YYYYMMDD')
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_[0-9]{8}$'
$$;
-- +goose StatementEnd

ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE deliveries RENAME TO deliveries_unpartitioned;
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_unpartitioned;

CREATE TABLE events (
    id              uuid NOT NULL,
    tenant_id       uuid NOT NULL,
    type            text NOT NULL,
    payload         json NOT NULL,
    coalesce_key    text,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    consumer        text,
    broadcast       boolean NOT NULL DEFAULT false,
    CHECK (NOT (broadcast AND consumer IS NOT NULL))
) PARTITION BY RANGE (id);

CREATE TABLE deliveries (
    id              uuid NOT NULL,
    tenant_id       uuid NOT NULL,
    event_id        uuid NOT NULL,
    endpoint_id     uuid NOT NULL,
    event_type      text NOT NULL,
    coalesce_key    text,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed', 'dead')),
    attempt_count   integer NOT NULL DEFAULT 0,
    failure_count   integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    -- No foreign key: the delivery replayed may be gone with its week.
    replayed_from   uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (event_id);

CREATE SEQUENCE delivery_attempts_seq AS bigint;
CREATE TABLE delivery_attempts (
    id            bigint NOT NULL DEFAULT nextval('delivery_attempts_seq'),
    delivery_id   uuid NOT NULL,
    at            timestamptz NOT NULL,
    status_code   integer,
    error         text,
    latency_ms    integer NOT NULL,
    response_body text,
    endpoint_id   uuid NOT NULL,
    event_id      uuid NOT NULL
) PARTITION BY RANGE (event_id);
ALTER SEQUENCE delivery_attempts_seq OWNED BY delivery_attempts.id;

CREATE TABLE events_kept PARTITION OF events DEFAULT;
CREATE TABLE deliveries_kept PARTITION OF deliveries DEFAULT;
CREATE TABLE delivery_attempts_kept PARTITION OF delivery_attempts DEFAULT;

SELECT sluice_ensure_week(to_timestamp(week_ms / 1000))
FROM (
    SELECT DISTINCT sluice_week_start_ms(sluice_uuid_ms(id)) AS week_ms FROM events_unpartitioned
    UNION
    SELECT sluice_week_start_ms((extract(epoch FROM now() + n * interval '2 days') * 1000)::bigint) FROM generate_series(0, 1) n
) weeks;

INSERT INTO events SELECT * FROM events_unpartitioned;
INSERT INTO deliveries SELECT * FROM deliveries_unpartitioned;
INSERT INTO delivery_attempts (id, delivery_id, at, status_code, error, latency_ms, response_body, endpoint_id, event_id)
SELECT a.id, a.delivery_id, a.at, a.status_code, a.error, a.latency_ms, a.response_body, a.endpoint_id, d.event_id
FROM delivery_attempts_unpartitioned a
JOIN deliveries_unpartitioned d ON d.id = a.delivery_id;
SELECT setval('delivery_attempts_seq', (SELECT coalesce(max(id), 0) + 1 FROM delivery_attempts), false);

DROP TABLE delivery_attempts_unpartitioned, deliveries_unpartitioned, events_unpartitioned;

ALTER TABLE events ADD PRIMARY KEY (id),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX events_tenant_id_id_idx ON events (tenant_id, id);
-- Not unique: a unique index of a partitioned table must hold its
-- partition key. CreateEvent serializes one key's requests with an
-- advisory lock and looks the key up in the last 24 hours.
CREATE INDEX events_idempotency_key_idx ON events (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

ALTER TABLE deliveries ADD PRIMARY KEY (id, event_id),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (endpoint_id) REFERENCES endpoints (id) ON DELETE CASCADE;
CREATE UNIQUE INDEX deliveries_event_endpoint_idx ON deliveries (event_id, endpoint_id)
    WHERE replayed_from IS NULL;
CREATE INDEX deliveries_claim_idx ON deliveries (endpoint_id, next_attempt_at, id)
    WHERE status IN ('pending', 'failed');
CREATE INDEX deliveries_coalesce_idx ON deliveries (endpoint_id, coalesce_key, event_type)
    WHERE coalesce_key IS NOT NULL;
CREATE INDEX deliveries_tenant_id_id_idx ON deliveries (tenant_id, id);
CREATE INDEX deliveries_endpoint_id_id_idx ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_replayed_from_idx ON deliveries (replayed_from)
    WHERE replayed_from IS NOT NULL;
-- Dead deliveries kept for replay: how sluice_drop_week finds them in a
-- week, and sluice_expire_kept in deliveries_kept.
CREATE INDEX deliveries_dead_idx ON deliveries (updated_at) WHERE status = 'dead';
-- Only deliveries_kept has delivered rows worth finding: a week's go with it.
CREATE INDEX deliveries_kept_delivered_idx ON deliveries_kept (updated_at)
    WHERE status = 'delivered';

ALTER TABLE delivery_attempts ADD PRIMARY KEY (event_id, id);
CREATE INDEX delivery_attempts_delivery_id_idx ON delivery_attempts (delivery_id, id);
CREATE INDEX delivery_attempts_endpoint_at_idx ON delivery_attempts (endpoint_id, at)
    INCLUDE (status_code, latency_ms);

-- +goose Down
-- Back to one table each. Keeping the partitioned tables' data.
ALTER TABLE events RENAME TO events_partitioned;
ALTER TABLE deliveries RENAME TO deliveries_partitioned;
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_partitioned;

CREATE TABLE events (LIKE events_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE deliveries (LIKE deliveries_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE delivery_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   uuid NOT NULL,
    at            timestamptz NOT NULL,
    status_code   integer,
    error         text,
    latency_ms    integer NOT NULL,
    response_body text,
    endpoint_id   uuid NOT NULL
);
INSERT INTO events SELECT * FROM events_partitioned;
INSERT INTO deliveries SELECT * FROM deliveries_partitioned;
INSERT INTO delivery_attempts (id, delivery_id, at, status_code, error, latency_ms, response_body, endpoint_id)
OVERRIDING SYSTEM VALUE
SELECT id, delivery_id, at, status_code, error, latency_ms, response_body, endpoint_id FROM delivery_attempts_partitioned;
SELECT setval(pg_get_serial_sequence('delivery_attempts', 'id'), (SELECT coalesce(max(id), 0) + 1 FROM delivery_attempts), false);
DROP TABLE delivery_attempts_partitioned, deliveries_partitioned, events_partitioned;

ALTER TABLE events ADD PRIMARY KEY (id),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX events_tenant_id_id_idx ON events (tenant_id, id);
CREATE UNIQUE INDEX events_idempotency_key_idx ON events (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE deliveries ADD PRIMARY KEY (id),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (endpoint_id) REFERENCES endpoints (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (replayed_from) REFERENCES deliveries (id) ON DELETE SET NULL;
CREATE UNIQUE INDEX deliveries_event_endpoint_idx ON deliveries (event_id, endpoint_id)
    WHERE replayed_from IS NULL;
CREATE INDEX deliveries_claim_idx ON deliveries (endpoint_id, next_attempt_at, id)
    WHERE status IN ('pending', 'failed');
CREATE INDEX deliveries_coalesce_idx ON deliveries (endpoint_id, coalesce_key, event_type)
    WHERE coalesce_key IS NOT NULL;
CREATE INDEX deliveries_tenant_id_id_idx ON deliveries (tenant_id, id);
CREATE INDEX deliveries_endpoint_id_id_idx ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_replayed_from_idx ON deliveries (replayed_from)
    WHERE replayed_from IS NOT NULL;
CREATE INDEX deliveries_retention_idx ON deliveries (updated_at) WHERE status = 'delivered';
ALTER TABLE delivery_attempts ADD FOREIGN KEY (delivery_id) REFERENCES deliveries (id) ON DELETE CASCADE;
CREATE INDEX delivery_attempts_delivery_id_idx ON delivery_attempts (delivery_id, id);
CREATE INDEX delivery_attempts_endpoint_at_idx ON delivery_attempts (endpoint_id, at)
    INCLUDE (status_code, latency_ms);

DROP FUNCTION sluice_weeks();
DROP FUNCTION sluice_expire_kept(timestamptz, timestamptz, integer);
DROP FUNCTION sluice_drop_week(date, timestamptz);
DROP FUNCTION sluice_ensure_week(timestamptz);
DROP FUNCTION sluice_week_hi(uuid);
DROP FUNCTION sluice_week_lo(uuid);
DROP FUNCTION sluice_week_start_ms(bigint);
DROP FUNCTION sluice_uuid_at(bigint);
DROP FUNCTION sluice_uuid_ms(uuid);
