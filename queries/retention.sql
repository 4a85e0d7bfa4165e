-- name: TenantRetention :one
-- A tenant's own retention, in seconds; no row when it has none.
SELECT * FROM tenant_retention WHERE tenant_id = @tenant_id;

-- name: SetTenantRetention :exec
-- Sets a tenant's own retention; both null removes its row.
WITH gone AS (
    DELETE FROM tenant_retention
    WHERE tenant_id = @tenant_id AND sqlc.narg(retention_seconds)::bigint IS NULL
      AND sqlc.narg(dead_retention_seconds)::bigint IS NULL
)
INSERT INTO tenant_retention (tenant_id, retention_seconds, dead_retention_seconds)
SELECT @tenant_id, sqlc.narg(retention_seconds)::bigint, sqlc.narg(dead_retention_seconds)::bigint
WHERE sqlc.narg(retention_seconds)::bigint IS NOT NULL OR sqlc.narg(dead_retention_seconds)::bigint IS NOT NULL
ON CONFLICT (tenant_id) DO UPDATE
SET retention_seconds = excluded.retention_seconds, dead_retention_seconds = excluded.dead_retention_seconds;

-- name: TenantsWithRetention :many
-- The tenants with a retention of their own.
SELECT * FROM tenant_retention ORDER BY tenant_id;

-- name: ExpireTenantDeliveries :one
-- Deletes up to max_rows deliveries of the tenant past its own retention
-- (sluice_kept_delivery), with their attempts, and returns how many. It
-- reads only the tenant's rows, through each week's (tenant_id,
-- created_at, id) index, up to before: the first id of the time past which
-- nothing of the tenant is kept (a delivery's id, a UUIDv7, is its
-- creation time, and a dead one died after it was made); the index is
-- bounded by created_at an hour past that time, a row's created_at being
-- its id's time give or take the insert. Its event's id is older than the
-- delivery's, so event_id < before leaves out the partitions of the weeks
-- after it.
WITH gone AS (
    DELETE FROM deliveries d
    USING (
        SELECT x.id, x.event_id FROM deliveries x
        WHERE x.tenant_id = @tenant_id AND x.id < @before
          AND x.created_at < to_timestamp(sluice_uuid_ms(@before) / 1000.0) + interval '1 hour' AND x.event_id < @before
          AND NOT sluice_kept_delivery(x.status, x.id, x.updated_at,
                                       (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
        LIMIT @max_rows
    ) g
    WHERE d.id = g.id AND d.event_id = g.event_id
    RETURNING d.id, d.event_id
), attempts AS (
    DELETE FROM delivery_attempts a USING gone
    WHERE a.delivery_id = gone.id AND a.event_id = gone.event_id
)
SELECT count(*)::integer AS deleted FROM gone;

-- name: ExpireTenantEvents :one
-- Deletes up to max_rows events of the tenant older than its own
-- retention that no delivery needs any more (ExpireTenantDeliveries has
-- removed those past it), and returns how many; only the tenant's rows
-- are read, through each week's (tenant_id, created_at, id) index,
-- bounded as ExpireTenantDeliveries's is.
WITH gone AS (
    DELETE FROM events e
    USING (
        SELECT x.id FROM events x
        WHERE x.tenant_id = @tenant_id AND x.id < @before
          AND x.created_at < to_timestamp(sluice_uuid_ms(@before) / 1000.0) + interval '1 hour'
          AND x.id < (SELECT sluice_delivered_from(@tenant_id))
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = x.id AND d.replayed_from IS NULL)
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = x.id AND d.replayed_from IS NOT NULL)
        LIMIT @max_rows
    ) g
    WHERE e.id = g.id
    RETURNING e.id
)
SELECT count(*)::integer AS deleted FROM gone;
