-- UpsertConsumer creates a consumer or updates its name and alert address;
-- inserted tells which (xmax is 0 only on a row this statement inserted).
-- name: UpsertConsumer :one
INSERT INTO consumers (id, tenant_id, uid, name, alert_email, portal_generation)
VALUES (@id, @tenant_id, @uid, @name, @alert_email, @portal_generation)
ON CONFLICT (tenant_id, uid) DO UPDATE
SET name = EXCLUDED.name, alert_email = EXCLUDED.alert_email, updated_at = now()
RETURNING sqlc.embed(consumers), (xmax = 0)::boolean AS inserted;

-- name: GetConsumer :one
SELECT sqlc.embed(c),
    (SELECT count(*) FROM endpoints e WHERE e.tenant_id = c.tenant_id AND e.consumer = c.uid) AS endpoint_count
FROM consumers c
WHERE c.tenant_id = @tenant_id AND c.uid = @uid;

-- name: ListConsumers :many
SELECT sqlc.embed(c),
    (SELECT count(*) FROM endpoints e WHERE e.tenant_id = c.tenant_id AND e.consumer = c.uid) AS endpoint_count
FROM consumers c
WHERE c.tenant_id = @tenant_id
  AND (sqlc.narg(after)::uuid IS NULL OR c.id < sqlc.narg(after)::uuid)
ORDER BY c.id DESC
LIMIT @max_rows;

-- name: DeleteConsumer :execrows
-- Its endpoints go by cascade, and their deliveries with them; their
-- attempts, which have no foreign key (00014_time_partitions.sql), here.
WITH attempts AS (
    DELETE FROM delivery_attempts a USING endpoints e
    WHERE e.tenant_id = @tenant_id AND e.consumer = @uid AND a.endpoint_id = e.id
)
DELETE FROM consumers c WHERE c.tenant_id = @tenant_id AND c.uid = @uid;

-- ConsumersByUID returns which of uids name consumers of the tenant.
-- name: ConsumersByUID :many
SELECT uid FROM consumers WHERE tenant_id = @tenant_id AND uid = ANY(@uids::text[]);

-- RenewPortalGeneration voids every portal link of a consumer.
-- name: RenewPortalGeneration :one
UPDATE consumers SET portal_generation = @portal_generation, updated_at = now()
WHERE tenant_id = @tenant_id AND uid = @uid
RETURNING id;

-- name: DeletePortalSessions :exec
DELETE FROM dashboard_sessions WHERE consumer_id = @consumer_id;

-- ConsumerForPortal loads the consumer a portal link names, with its tenant.
-- name: ConsumerForPortal :one
SELECT sqlc.embed(c), sqlc.embed(t)
FROM consumers c
JOIN tenants t ON t.id = c.tenant_id
WHERE c.id = @id;
