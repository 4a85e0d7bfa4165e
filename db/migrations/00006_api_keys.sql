-- +goose Up

-- API keys become a resource a tenant manages: named, optionally expiring,
-- with a coarse last-use time (written at most once a minute per key).
-- Revoking a key deletes its row, and with it every dashboard session
-- opened with it.
ALTER TABLE api_keys
    ADD COLUMN name         text NOT NULL DEFAULT '',
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_tenant_id_id_idx ON api_keys (tenant_id, id);
DROP INDEX api_keys_tenant_id_idx;

-- A dashboard sign-in. The browser's cookie holds only a random token; this
-- row holds its SHA-256. Sign-out deletes the row; so does revoking the key
-- it was opened with (ON DELETE CASCADE).
CREATE TABLE dashboard_sessions (
    token_hash bytea PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    api_key_id uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_api_key_id_idx ON dashboard_sessions (api_key_id);
CREATE INDEX dashboard_sessions_tenant_id_idx ON dashboard_sessions (tenant_id);

-- +goose Down
DROP TABLE dashboard_sessions;
CREATE INDEX api_keys_tenant_id_idx ON api_keys (tenant_id);
DROP INDEX api_keys_tenant_id_id_idx;
ALTER TABLE api_keys
    DROP COLUMN name,
    DROP COLUMN expires_at,
    DROP COLUMN last_used_at;
