-- +goose Up

-- Dropping a week used to be one transaction holding the three tables'
-- exclusive locks throughout: detaching the week's partitions, moving out
-- what must outlive it (inserting those rows again, foreign-key checks
-- and all, so that the locks were held longer the more it kept: 10-13 ms
-- of its 17 for 300 dead deliveries, under load) and dropping them, whose
-- commit removed the files (about 1.3 GB for a day of 2,000,000
-- deliveries) in one go. Now it is three steps, and only the first locks
-- what Sluice's statements use:
--
--   sluice_retire_week   detaches the week's three partitions and renames
--                        them retired_*: a few ms under the locks,
--                        whatever the week holds.
--   sluice_keep_retired  moves what must outlive a retired week into the
--                        kept partitions, as sluice_drop_week did, and
--                        renames the tables expired_*, in one transaction
--                        that takes no lock a delivery waits for.
--   sluice_drop_expired  drops one index or table of the expired weeks;
--                        retention.Worker calls it one relation at a time,
--                        paced, so that removing their files is spread out.
--
-- Between the first two steps, for as long as the second takes, what a
-- retired week keeps (deliveries queued two weeks or more, dead ones kept
-- for replay) is out of sight: the API does not find it and no claim
-- sees it. A queued one is claimed again once it is back (the sweeper's
-- walk finds its endpoint). A run that stops between the steps leaves the
-- week retired, and the next run keeps it and drops it.

-- +goose StatementBegin
CREATE FUNCTION sluice_retire_week(week date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    suffix text := to_char(week, 'YYYYMMDD');
    tbl    text;
BEGIN
    IF to_regclass('events_' || suffix) IS NULL THEN
        RETURN false;
    END IF;
    -- Every lock the detaches take, taken first (see sluice_drop_week in
    -- 00014_time_partitions.sql), in the order Sluice's most frequent
    -- statements take them: a record takes the attempts before the
    -- deliveries, a post the events before the deliveries. A wait here
    -- that is a deadlock after all ends at the caller's lock_timeout.
    -- ONLY the parents: every statement of Sluice's goes through them, and
    -- locking each week's partition too would wait for autovacuum at work
    -- on one. The retired tables keep their foreign keys: dropping one
    -- locks the table it references exclusively, which sluice_drop_expired
    -- does with nothing else locked.
    LOCK TABLE tenants, endpoints IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE ONLY delivery_attempts, ONLY events, ONLY deliveries IN ACCESS EXCLUSIVE MODE;
    FOREACH tbl IN ARRAY ARRAY['delivery_attempts', 'events', 'deliveries'] LOOP
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', tbl, tbl || '_' || suffix);
        EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl || '_' || suffix, 'retired_' || tbl || '_' || suffix);
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- sluice_keep_retired moves, from every retired week, what must outlive
-- it into the kept partitions: deliveries still queued, dead ones that
-- died at or after dead_before, their attempts and their events. It finds
-- them through the partial indexes, so its cost follows what it keeps.
-- It returns how many deliveries it kept.
-- +goose StatementBegin
CREATE FUNCTION sluice_keep_retired(dead_before timestamptz) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    seqscan text := current_setting('enable_seqscan');
    suffix  text;
    tbl     text;
    n       bigint;
    kept    bigint := 0;
BEGIN
    FOR suffix IN SELECT substr(relname, 20) FROM pg_class
                  WHERE relname ~ '^retired_deliveries_[0-9]{8}$' AND relkind = 'r' AND pg_table_is_visible(oid)
                  ORDER BY 1 LOOP
        -- The few rows kept are reached through the partial indexes even
        -- when the week's statistics would make a scan look cheaper.
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
            $sql$, 'retired_deliveries_' || suffix, 'retired_delivery_attempts_' || suffix,
            'retired_events_' || suffix, dead_before) INTO n;
        PERFORM set_config('enable_seqscan', seqscan, true);
        kept := kept + n;
        FOREACH tbl IN ARRAY ARRAY['events', 'deliveries', 'delivery_attempts'] LOOP
            EXECUTE format('ALTER TABLE %I RENAME TO %I', 'retired_' || tbl || '_' || suffix, 'expired_' || tbl || '_' || suffix);
        END LOOP;
    END LOOP;
    RETURN kept;
END
$$;
-- +goose StatementEnd

-- sluice_drop_expired drops one relation of the expired weeks and returns
-- its name, or NULL when none is left: first their indexes that back no
-- constraint, largest first, then the tables themselves (each with what
-- is left of it: its primary key, its TOAST table).
-- +goose StatementBegin
CREATE FUNCTION sluice_drop_expired() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    victim text;
BEGIN
    SELECT quote_ident(x.relname) INTO victim
    FROM pg_index i
    JOIN pg_class t ON t.oid = i.indrelid
    JOIN pg_class x ON x.oid = i.indexrelid
    WHERE t.relname ~ '^expired_(events|deliveries|delivery_attempts)_[0-9]{8}$' AND pg_table_is_visible(t.oid)
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
    ORDER BY pg_relation_size(i.indexrelid) DESC, x.relname
    LIMIT 1;
    IF victim IS NOT NULL THEN
        EXECUTE 'DROP INDEX ' || victim;
        RETURN victim;
    END IF;
    SELECT quote_ident(t.relname) INTO victim
    FROM pg_class t
    WHERE t.relname ~ '^expired_(events|deliveries|delivery_attempts)_[0-9]{8}$' AND t.relkind = 'r'
      AND pg_table_is_visible(t.oid)
    ORDER BY t.relname
    LIMIT 1;
    IF victim IS NULL THEN
        RETURN NULL;
    END IF;
    -- A table with foreign keys (deliveries) drops their triggers on the
    -- tables they reference, which locks those exclusively: taken first,
    -- in the order a post takes them (endpoints as it routes, tenants as
    -- its foreign keys are checked).
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = victim::regclass AND contype = 'f') THEN
        LOCK TABLE endpoints, tenants IN ACCESS EXCLUSIVE MODE;
    END IF;
    EXECUTE 'DROP TABLE ' || victim;
    RETURN victim;
END
$$;
-- +goose StatementEnd

DROP FUNCTION sluice_drop_week(date, timestamptz);

-- +goose Down
-- What was retired is kept (for a dead retention of 30 days) and dropped
-- at once, and sluice_drop_week is 00014_time_partitions.sql's again.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM sluice_keep_retired(now() - interval '30 days');
    WHILE sluice_drop_expired() IS NOT NULL LOOP
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION sluice_drop_expired();
DROP FUNCTION sluice_keep_retired(timestamptz);
DROP FUNCTION sluice_retire_week(date);
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
    LOCK TABLE tenants, endpoints IN SHARE ROW EXCLUSIVE MODE;
    LOCK TABLE deliveries, events, delivery_attempts IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('ALTER TABLE events DETACH PARTITION %I', 'events_' || suffix);
    EXECUTE format('ALTER TABLE deliveries DETACH PARTITION %I', 'deliveries_' || suffix);
    EXECUTE format('ALTER TABLE delivery_attempts DETACH PARTITION %I', 'delivery_attempts_' || suffix);
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
