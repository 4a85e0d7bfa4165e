-- name: CreateSubscription :one
INSERT INTO subscriptions (id, tenant_id, endpoint_id, event_types)
SELECT @id, e.tenant_id, e.id, @event_types::text[]
FROM endpoints e
WHERE e.tenant_id = @tenant_id AND e.id = @endpoint_id
RETURNING *;

-- name: GetSubscription :one
SELECT * FROM subscriptions WHERE tenant_id = @tenant_id AND id = @id;

-- name: ListSubscriptions :many
SELECT * FROM subscriptions
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(endpoint_id)::uuid IS NULL OR endpoint_id = sqlc.narg(endpoint_id)::uuid)
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: DeleteSubscription :execrows
DELETE FROM subscriptions WHERE tenant_id = @tenant_id AND id = @id;

-- name: DeleteEndpointSubscriptions :exec
DELETE FROM subscriptions WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id;
