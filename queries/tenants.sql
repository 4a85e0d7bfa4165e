-- name: CreateTenant :one
INSERT INTO tenants (id, name, alert_email)
VALUES (@id, @name, @alert_email)
RETURNING *;

-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: CreateAPIKey :exec
INSERT INTO api_keys (id, tenant_id, prefix, key_hash)
VALUES (@id, @tenant_id, @prefix, @key_hash);

-- name: TenantByAPIKeyHash :one
SELECT t.*
FROM api_keys k
JOIN tenants t ON t.id = k.tenant_id
WHERE k.key_hash = @key_hash;
