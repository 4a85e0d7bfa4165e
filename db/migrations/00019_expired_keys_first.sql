-- +goose Up

-- sluice_drop_expired dropped a table with foreign keys (an expired week's
-- deliveries and events) in one transaction: the DROP removes the keys'
-- triggers on the tables they reference, so it held endpoints and tenants
-- exclusively, and its commit then removed the table's files (the
-- deliveries heap of a day of 2,000,000 is about 360 MB, 190 ms on this
-- box under load) while every post and every dispatch step waited for
-- those two tables. Now a table's foreign keys go first, one call of
-- their own, with nothing to remove at commit; the table goes at a later
-- call, locking only itself.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_drop_expired() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    victim text;
    tbl    regclass;
    fkey   text;
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
    SELECT t.oid::regclass INTO tbl
    FROM pg_class t
    WHERE t.relname ~ '^expired_(events|deliveries|delivery_attempts)_[0-9]{8}$' AND t.relkind = 'r'
      AND pg_table_is_visible(t.oid)
    ORDER BY t.relname
    LIMIT 1;
    IF tbl IS NULL THEN
        RETURN NULL;
    END IF;
    -- Its foreign keys first: dropping one drops its triggers on the
    -- table it references, which locks that table exclusively. Both are
    -- taken first, in the order a post takes them (endpoints as it
    -- routes, tenants as its foreign keys are checked).
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = tbl AND contype = 'f') THEN
        LOCK TABLE endpoints, tenants IN ACCESS EXCLUSIVE MODE;
        FOR fkey IN SELECT conname FROM pg_constraint WHERE conrelid = tbl AND contype = 'f' ORDER BY conname LOOP
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', tbl, fkey);
        END LOOP;
        RETURN tbl::text || ' foreign keys';
    END IF;
    victim := tbl::text; -- named before it goes: a dropped table's regclass is only its oid
    EXECUTE 'DROP TABLE ' || victim;
    RETURN victim;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION sluice_drop_expired() RETURNS text LANGUAGE plpgsql AS $$
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
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = victim::regclass AND contype = 'f') THEN
        LOCK TABLE endpoints, tenants IN ACCESS EXCLUSIVE MODE;
    END IF;
    EXECUTE 'DROP TABLE ' || victim;
    RETURN victim;
END
$$;
-- +goose StatementEnd
