-- +goose Up

-- An endpoint's Ed25519 key pair, while its signature option includes v1a
-- (null otherwise): the private key's 32-byte seed sealed like the
-- signing secret, the public key in the clear for the tenant's JWKS. A
-- rotation of the secret rotates the key pair too: the previous pair keeps
-- signing, and stays in the JWKS, until previous_secret_expires_at.
-- sign_key_version counts the endpoint's key pairs (the JWKS kid is
-- "<endpoint id>.<version>"), the previous pair's being one less.
ALTER TABLE endpoints
    ADD COLUMN sign_key_enc bytea,
    ADD COLUMN sign_public_key bytea,
    ADD COLUMN sign_key_version integer NOT NULL DEFAULT 0,
    ADD COLUMN previous_sign_key_enc bytea,
    ADD COLUMN previous_sign_public_key bytea;

-- The JWKS reads a tenant's keys alone: endpoints without one are not in
-- the index.
CREATE INDEX endpoints_signing_keys_idx ON endpoints (tenant_id, id) WHERE sign_public_key IS NOT NULL;

-- +goose Down
DROP INDEX endpoints_signing_keys_idx;
ALTER TABLE endpoints
    DROP COLUMN sign_key_enc,
    DROP COLUMN sign_public_key,
    DROP COLUMN sign_key_version,
    DROP COLUMN previous_sign_key_enc,
    DROP COLUMN previous_sign_public_key;
