-- name: SetTenantAPIRate :execrows
-- Sets, or with NULL clears, a tenant's own API rate.
UPDATE tenants SET api_rate = sqlc.narg(api_rate) WHERE id = @id;

-- name: TenantAPIRate :one
SELECT api_rate FROM tenants WHERE id = @id;
