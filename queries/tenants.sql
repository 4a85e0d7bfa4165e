-- name: CreateTenant :one
INSERT INTO tenants (id, name, alert_email)
VALUES (@id, @name, @alert_email)
RETURNING *;

-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: ListTenants :many
SELECT * FROM tenants
WHERE (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- SetTenantDisabled disables (keeping the first time it was disabled) or
-- enables a tenant.
-- name: SetTenantDisabled :one
UPDATE tenants
SET disabled_at = CASE WHEN @disabled::boolean THEN coalesce(disabled_at, now()) END
WHERE id = @id
RETURNING *;
