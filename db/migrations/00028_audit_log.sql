-- +goose Up

-- The audit log: one row per change made through the API (and, later, the
-- dashboard and the portal), inserted in the transaction of the change
-- itself (store.Change), so a change that rolls back leaves no row and a
-- committed one always has its row.
--
-- Partitioned by month of `at`, so that retention (SLUICE_AUDIT_RETENTION)
-- drops whole months (DROP TABLE) instead of deleting rows. The retention
-- job creates each month's partition ahead of time with
-- sluice_ensure_audit_month and drops the months wholly past retention
-- with sluice_drop_audit_months; audit_log_kept, the DEFAULT partition,
-- catches rows of a month without a partition yet.
CREATE TABLE audit_log (
    id          uuid NOT NULL,
    tenant_id   uuid NOT NULL,
    at          timestamptz NOT NULL,
    actor_type  text NOT NULL CHECK (actor_type IN ('api_key', 'member', 'portal')),
    actor_id    text NOT NULL,
    actor_name  text NOT NULL,
    action      text NOT NULL,
    object_id   text,
    source_ip   text,
    changed     text[],
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);

CREATE TABLE audit_log_kept PARTITION OF audit_log DEFAULT;

-- A tenant's log, newest first (id is a UUIDv7 of `at`), and its filters.
CREATE INDEX audit_log_tenant_id ON audit_log (tenant_id, id DESC);

-- sluice_ensure_audit_month creates the partition of the month holding t
-- (audit_log_202611), moving into it any rows of the month that landed in
-- audit_log_kept meanwhile, and reports whether it created it.
-- +goose StatementBegin
CREATE FUNCTION sluice_ensure_audit_month(t timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo   timestamptz := date_trunc('month', t AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    hi   timestamptz := lo + interval '1 month';
    name text := 'audit_log_' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE audit_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
    EXECUTE format('INSERT INTO %I SELECT * FROM audit_log_kept WHERE at >= %L AND at < %L', name, lo, hi);
    DELETE FROM audit_log_kept WHERE at >= lo AND at < hi;
    EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lo, hi);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- sluice_drop_audit_months drops every month partition that ends at or
-- before `before`, and deletes the kept rows older than it; it returns the
-- number of partitions dropped.
-- +goose StatementBegin
CREATE FUNCTION sluice_drop_audit_months(before timestamptz) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    part    record;
    dropped integer := 0;
BEGIN
    FOR part IN
        SELECT c.relname
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'audit_log'::regclass AND c.relname ~ '^audit_log_[0-9]{6}$'
          AND to_date(substr(c.relname, 11), 'YYYYMM') + interval '1 month' <= before AT TIME ZONE 'UTC'
    LOOP
        EXECUTE format('DROP TABLE %I', part.relname);
        dropped := dropped + 1;
    END LOOP;
    DELETE FROM audit_log_kept WHERE at < before;
    RETURN dropped;
END
$$;
-- +goose StatementEnd

SELECT sluice_ensure_audit_month(now());
SELECT sluice_ensure_audit_month(now() + interval '1 month');

-- +goose Down
DROP FUNCTION sluice_drop_audit_months(timestamptz);
DROP FUNCTION sluice_ensure_audit_month(timestamptz);
DROP TABLE audit_log;
