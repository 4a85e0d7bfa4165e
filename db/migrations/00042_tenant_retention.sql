-- +goose Up

-- A tenant's own retention (PATCH /v1/tenant): how long its delivered
-- deliveries (retention) and its dead ones (dead_retention) are kept, in
-- seconds; null is the server's (SLUICE_RETENTION, SLUICE_DEAD_RETENTION),
-- which the partition drops of the retention job keep for everyone. A row
-- exists only for a tenant with one of its own, so the others carry
-- nothing. A tenant's own retention is no longer than the server's
-- (control checks it): it only ever removes sooner.
--
-- What is past a tenant's own retention is out of sight at once: every
-- read of deliveries and events tests sluice_kept_delivery or
-- sluice_kept_event, with the tenant's cutoffs looked up once per
-- statement. The retention job then deletes those rows in bounded batches
-- (ExpireTenantDeliveries, ExpireTenantEvents), reading only that
-- tenant's rows through the (tenant_id, id) indexes: ids are UUIDv7, so
-- an id range is a range of creation times.
CREATE TABLE tenant_retention (
    tenant_id              uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    retention_seconds      bigint CHECK (retention_seconds > 0),
    dead_retention_seconds bigint CHECK (dead_retention_seconds > 0)
);

-- sluice_delivered_from is the smallest id a delivered delivery of the
-- tenant may have and still be kept: its own retention back from now, as
-- the first UUIDv7 of that millisecond; the nil UUID when it has none.
CREATE FUNCTION sluice_delivered_from(tenant uuid) RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce((SELECT sluice_uuid_at((extract(epoch FROM now()) * 1000)::bigint - r.retention_seconds * 1000)
                     FROM tenant_retention r WHERE r.tenant_id = tenant),
                    '00000000-0000-0000-0000-000000000000'::uuid);

-- sluice_dead_from is the earliest time a dead delivery of the tenant may
-- have died (updated_at) and still be kept: its own dead retention back
-- from now; -infinity when it has none.
CREATE FUNCTION sluice_dead_from(tenant uuid) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce((SELECT now() - r.dead_retention_seconds * interval '1 second'
                     FROM tenant_retention r WHERE r.tenant_id = tenant),
                    '-infinity'::timestamptz);

-- sluice_kept_delivery says whether a delivery is within its tenant's own
-- retention, given sluice_delivered_from and sluice_dead_from of the
-- tenant: a queued one always is, a delivered one while it is younger
-- than retention, a dead one while it died less than dead_retention ago.
-- A read passes the two as "(SELECT sluice_delivered_from(@tenant_id))",
-- which Postgres runs once per statement (an InitPlan); this function,
-- which has no subquery, it inlines, so the test costs two comparisons a
-- row.
CREATE FUNCTION sluice_kept_delivery(status text, id uuid, updated_at timestamptz, delivered_from uuid, dead_from timestamptz)
    RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (status <> 'delivered' OR id >= delivered_from) AND (status <> 'dead' OR updated_at >= dead_from);

-- sluice_kept_event says whether an event older than its tenant's own
-- retention is kept all the same: while one of its deliveries is kept
-- other than as delivered (queued, or dead and kept for replay). A read
-- says "(id >= (SELECT sluice_delivered_from(@tenant_id)) OR
-- sluice_kept_event(@tenant_id, id))", so only such old events pay its
-- look-up.
CREATE FUNCTION sluice_kept_event(tenant uuid, event_id uuid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM deliveries d
                   WHERE d.event_id = sluice_kept_event.event_id AND d.tenant_id = tenant
                     AND d.status <> 'delivered'
                     AND (d.status <> 'dead' OR d.updated_at >= sluice_dead_from(tenant)));

-- +goose Down
DROP FUNCTION sluice_kept_event(uuid, uuid);
DROP FUNCTION sluice_kept_delivery(text, uuid, timestamptz, uuid, timestamptz);
DROP FUNCTION sluice_dead_from(uuid);
DROP FUNCTION sluice_delivered_from(uuid);
DROP TABLE tenant_retention;
