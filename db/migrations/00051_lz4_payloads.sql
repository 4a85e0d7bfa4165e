-- +goose Up
-- Payloads and stored response bodies are compressed with lz4 instead of
-- pglz, Postgres's default, where the server has lz4 (Debian's, the
-- official images' and the managed services' have). pglz spends half a
-- second trying to compress a 10 MiB payload it cannot shrink (random or
-- sealed bytes, SLUICE_PAYLOAD_ENCRYPTION's) before storing it as it
-- came; lz4 gives up in a fraction of that, and reads back faster what it
-- did compress. Rows stored before keep pglz; both are read alike.
--
-- A column's compression is a property of each partition: it is set on
-- every partition that exists, and on the parents, whose new partitions
-- copy it (sluice_ensure_week: LIKE … INCLUDING COMPRESSION).
-- +goose StatementBegin
DO $$
DECLARE
    col record;
    part regclass;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        RAISE NOTICE 'this Postgres was built without lz4: payloads stay compressed with pglz';
        RETURN;
    END IF;
    FOR col IN SELECT * FROM (VALUES ('events', 'payload'), ('delivery_attempts', 'response_body')) AS c (tbl, name) LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', col.tbl, col.name);
        FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = col.tbl::regclass LOOP
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET COMPRESSION lz4', part, col.name);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_ensure_week(t timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
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
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION)',
                       tbl || '_' || suffix, tbl);
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       tbl || '_kept', col, lo, col, hi, tbl || '_' || suffix);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', tbl, tbl || '_' || suffix, lo, hi);
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_ensure_week(t timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
DO $$
DECLARE
    col record;
    part regclass;
BEGIN
    FOR col IN SELECT * FROM (VALUES ('events', 'payload'), ('delivery_attempts', 'response_body')) AS c (tbl, name) LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION default', col.tbl, col.name);
        FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = col.tbl::regclass LOOP
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET COMPRESSION default', part, col.name);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd
