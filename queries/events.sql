-- name: InsertEvent :one
INSERT INTO events (id, tenant_id, type, payload, coalesce_key, idempotency_key)
VALUES (@id, @tenant_id, @type, @payload, @coalesce_key, @idempotency_key)
ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: EventByIdempotencyKey :one
SELECT * FROM events WHERE tenant_id = @tenant_id AND idempotency_key = @idempotency_key;

-- name: ReleaseIdempotencyKey :exec
UPDATE events SET idempotency_key = NULL WHERE id = @id;

-- name: GetEvent :one
SELECT * FROM events WHERE tenant_id = @tenant_id AND id = @id;

-- name: ListEvents :many
SELECT * FROM events
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(type)::text IS NULL OR type = sqlc.narg(type)::text)
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: EventsByID :many
SELECT * FROM events WHERE id = ANY(@ids::uuid[]) ORDER BY id;

-- name: SubscriptionsForTenant :many
SELECT s.endpoint_id, s.event_types
FROM subscriptions s
JOIN endpoints e ON e.id = s.endpoint_id
WHERE s.tenant_id = @tenant_id AND NOT e.disabled;
