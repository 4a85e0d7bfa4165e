-- name: CreateEndpoint :one
INSERT INTO endpoints (
    id, tenant_id, url, description,
    rate_limit_per_second, rate_limit_per_minute, rate_limit_burst,
    max_in_flight, headers, disabled, secret_enc
) VALUES (
    @id, @tenant_id, @url, @description,
    @rate_limit_per_second, @rate_limit_per_minute, @rate_limit_burst,
    @max_in_flight, @headers, @disabled, @secret_enc
)
RETURNING *;

-- name: GetEndpoint :one
SELECT * FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: ListEndpoints :many
SELECT * FROM endpoints
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: UpdateEndpoint :one
UPDATE endpoints SET
    url = @url,
    description = @description,
    rate_limit_per_second = @rate_limit_per_second,
    rate_limit_per_minute = @rate_limit_per_minute,
    rate_limit_burst = @rate_limit_burst,
    max_in_flight = @max_in_flight,
    headers = @headers,
    disabled = @disabled,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: DeleteEndpoint :execrows
DELETE FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: GetEndpointSecrets :one
SELECT secret_enc, previous_secret_enc, previous_secret_expires_at
FROM endpoints
WHERE tenant_id = @tenant_id AND id = @id;

-- name: RotateEndpointSecret :execrows
UPDATE endpoints SET
    previous_secret_enc = secret_enc,
    previous_secret_expires_at = @previous_expires_at,
    secret_enc = @secret_enc,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;
