-- name: SetEndpointSigningKey :execrows
-- Gives an endpoint a new key pair (the next version), or none when both
-- arguments are null; either way without a previous one.
UPDATE endpoints SET
    sign_key_enc = sqlc.narg(sign_key_enc),
    sign_public_key = sqlc.narg(sign_public_key),
    sign_key_version = sign_key_version + CASE WHEN sqlc.narg(sign_public_key)::bytea IS NULL THEN 0 ELSE 1 END,
    previous_sign_key_enc = NULL,
    previous_sign_public_key = NULL
WHERE tenant_id = @tenant_id AND id = @id;

-- name: RotateEndpointSigningKey :execrows
-- Makes an endpoint's key pair the previous one, signing until the
-- secret's previous_secret_expires_at (RotateEndpointSecret, in the same
-- transaction), and gives it a new one.
UPDATE endpoints SET
    previous_sign_key_enc = sign_key_enc,
    previous_sign_public_key = sign_public_key,
    sign_key_enc = @sign_key_enc,
    sign_public_key = @sign_public_key,
    sign_key_version = sign_key_version + 1
WHERE tenant_id = @tenant_id AND id = @id;

-- name: EndpointPublicKey :one
SELECT sign_public_key FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: TenantPublicKeys :many
-- A tenant's endpoints with a key pair (endpoints_signing_keys_idx), with
-- the previous public key and when it stops signing; no row for a tenant
-- that does not exist, one row of nulls for one without keys.
SELECT e.id, e.sign_key_version, e.sign_public_key,
    e.previous_sign_public_key, e.previous_secret_expires_at
FROM tenants t
LEFT JOIN endpoints e ON e.tenant_id = t.id AND e.sign_public_key IS NOT NULL
WHERE t.id = @tenant_id
ORDER BY e.id;
