-- name: SetEndpointAuth :exec
-- The endpoint's auth option was written: its sealed client secret, or the
-- stored one kept when secret_enc is null; any stored token is dropped,
-- made for the settings before. (A new row always has its secret: the
-- control layer refuses the option without one.)
INSERT INTO endpoint_auth (endpoint_id, secret_enc) VALUES (@endpoint_id, coalesce(sqlc.narg(secret_enc)::bytea, '\x'::bytea))
ON CONFLICT (endpoint_id) DO UPDATE SET
    secret_enc = coalesce(sqlc.narg(secret_enc)::bytea, endpoint_auth.secret_enc),
    token_enc = NULL, expires_at = NULL, refresh_at = NULL, refreshing_until = NULL,
    generation = endpoint_auth.generation + 1;

-- name: DeleteEndpointAuth :exec
DELETE FROM endpoint_auth WHERE endpoint_id = @endpoint_id;

-- name: EndpointAuthSecretSet :one
-- Whether the endpoint has a stored client secret (its row).
SELECT EXISTS (SELECT 1 FROM endpoint_auth WHERE endpoint_id = @endpoint_id);

-- name: EndpointToken :one
-- The shared access token of an endpoint with the auth option.
SELECT token_enc, expires_at, refresh_at, refreshing_until, generation
FROM endpoint_auth WHERE endpoint_id = @endpoint_id;

-- name: TakeTokenRefresh :one
-- Takes the lease to fetch the endpoint's next token until @until, when no
-- live lease is held and a token is due: there is none, its refresh time
-- has come, or it is the one of generation @rejected (refused by the
-- receiver). No row: another process holds the lease, or has saved a
-- fresh token already.
UPDATE endpoint_auth SET refreshing_until = @until::timestamptz
WHERE endpoint_id = @endpoint_id
  AND (refreshing_until IS NULL OR refreshing_until <= @now::timestamptz)
  AND (token_enc IS NULL OR refresh_at <= @now::timestamptz OR generation = @rejected)
RETURNING secret_enc, generation;

-- name: SaveToken :execrows
-- Saves the token fetched under the lease taken at generation @generation,
-- and frees the lease; nothing when the option changed meanwhile.
UPDATE endpoint_auth SET token_enc = @token_enc, expires_at = @expires_at::timestamptz, refresh_at = @refresh_at::timestamptz,
    refreshing_until = NULL, generation = generation + 1
WHERE endpoint_id = @endpoint_id AND generation = @generation;

-- name: ReleaseTokenRefresh :exec
-- Frees a lease whose fetch failed, so that the next attempt tries again.
UPDATE endpoint_auth SET refreshing_until = NULL
WHERE endpoint_id = @endpoint_id AND generation = @generation AND refreshing_until = @until::timestamptz;
