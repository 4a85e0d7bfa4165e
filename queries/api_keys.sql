-- name: CreateAPIKey :one
INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, expires_at)
VALUES (@id, @tenant_id, @name, @prefix, @key_hash, sqlc.narg(expires_at))
RETURNING *;

-- name: ListAPIKeys :many
SELECT * FROM api_keys
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: DeleteAPIKey :execrows
DELETE FROM api_keys WHERE tenant_id = @tenant_id AND id = @id;

-- name: DeleteAPIKeyByID :one
DELETE FROM api_keys WHERE id = @id RETURNING *;

-- AuthenticateAPIKey resolves a key's hash to its tenant, unless the key is
-- revoked (gone) or expired, with its tenant's disabled_at (the caller
-- refuses a disabled tenant). In the same round trip it records the use,
-- but writes at most once a minute per key: the UPDATE matches no row
-- otherwise.
-- name: AuthenticateAPIKey :one
WITH k AS (
    SELECT ak.id, ak.name, ak.tenant_id, ak.expires_at FROM api_keys ak
    WHERE ak.key_hash = @key_hash AND (ak.expires_at IS NULL OR ak.expires_at > now())
), touched AS (
    UPDATE api_keys u SET last_used_at = now()
    WHERE u.id = (SELECT k.id FROM k)
      AND (u.last_used_at IS NULL OR u.last_used_at < now() - interval '1 minute')
)
SELECT sqlc.embed(t), k.id AS api_key_id, k.name AS api_key_name, k.expires_at AS key_expires_at
FROM k JOIN tenants t ON t.id = k.tenant_id;

-- name: GetAPIKey :one
SELECT * FROM api_keys WHERE tenant_id = @tenant_id AND id = @id;
