-- name: CurrentDataKey :one
-- The tenant's newest data key, storing wrapped as its first when it has
-- none (secretbox.DataKeys). When another process stores the first key
-- at the same moment this statement's snapshot misses it and it returns
-- no row: the caller asks again.
WITH made AS (
    INSERT INTO tenant_data_keys (tenant_id, version, wrapped)
    SELECT @tenant_id, 1, @wrapped
    WHERE NOT EXISTS (SELECT 1 FROM tenant_data_keys k WHERE k.tenant_id = @tenant_id)
    ON CONFLICT DO NOTHING
    RETURNING version, wrapped
)
SELECT version, wrapped FROM made
UNION ALL
(SELECT k.version, k.wrapped FROM tenant_data_keys k WHERE k.tenant_id = @tenant_id ORDER BY k.version DESC LIMIT 1)
LIMIT 1;

-- name: DataKey :one
SELECT wrapped FROM tenant_data_keys WHERE tenant_id = @tenant_id AND version = @version;

-- name: ListDataKeys :many
-- Every tenant's data keys, for sluice keys rotate.
SELECT tenant_id, version, wrapped FROM tenant_data_keys ORDER BY tenant_id, version;

-- name: RewrapDataKey :execrows
-- Replaces a wrapped data key by the same key wrapped under a new master
-- key, if it is still the one read.
UPDATE tenant_data_keys SET wrapped = @new_wrapped, rewrapped_at = now()
WHERE tenant_id = @tenant_id AND version = @version AND wrapped = @old_wrapped;

-- name: ListSealedEndpointSecrets :many
-- Every endpoint's secrets sealed by the master key, for sluice keys rotate.
SELECT id, secret_enc, previous_secret_enc, sign_key_enc, previous_sign_key_enc, tls_key_enc, destination_url_enc
FROM endpoints ORDER BY id;

-- name: ResealEndpointSecrets :execrows
-- Replaces an endpoint's sealed secrets by the same secrets sealed under a
-- new master key, if none changed since they were read.
UPDATE endpoints SET secret_enc = @new_secret, previous_secret_enc = sqlc.narg(new_previous_secret),
    sign_key_enc = sqlc.narg(new_sign_key), previous_sign_key_enc = sqlc.narg(new_previous_sign_key),
    tls_key_enc = sqlc.narg(new_tls_key), destination_url_enc = sqlc.narg(new_destination_url)
WHERE id = @id AND secret_enc = @old_secret
  AND previous_secret_enc IS NOT DISTINCT FROM sqlc.narg(old_previous_secret)
  AND sign_key_enc IS NOT DISTINCT FROM sqlc.narg(old_sign_key)
  AND previous_sign_key_enc IS NOT DISTINCT FROM sqlc.narg(old_previous_sign_key)
  AND tls_key_enc IS NOT DISTINCT FROM sqlc.narg(old_tls_key)
  AND destination_url_enc IS NOT DISTINCT FROM sqlc.narg(old_destination_url);

-- name: ListSealedAuthSecrets :many
-- Every endpoint_auth row's sealed secrets, for sluice keys rotate.
SELECT endpoint_id, secret_enc, token_enc FROM endpoint_auth ORDER BY endpoint_id;

-- name: ResealAuthSecrets :execrows
UPDATE endpoint_auth SET secret_enc = @new_secret, token_enc = sqlc.narg(new_token)
WHERE endpoint_id = @endpoint_id AND secret_enc = @old_secret AND token_enc IS NOT DISTINCT FROM sqlc.narg(old_token);
