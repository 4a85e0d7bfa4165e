-- +goose Up

-- Each tenant's data keys for payload encryption at rest
-- (SLUICE_PAYLOAD_ENCRYPTION, secretbox.Payloads): the key sealed
-- ("wrapped") by SLUICE_ENCRYPTION_KEY, bound to the tenant. A sealed value
-- names the version of the key that sealed it; `sluice keys rotate`
-- re-wraps every row under a new master key in place (rewrapped_at), the
-- data keys themselves unchanged, so nothing sealed with them is rewritten.
CREATE TABLE tenant_data_keys (
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    version      integer NOT NULL CHECK (version > 0),
    wrapped      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    rewrapped_at timestamptz,
    PRIMARY KEY (tenant_id, version)
);

-- +goose Down
DROP TABLE tenant_data_keys;
