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

-- sluice_sealed_payload fails a statement, with SQLSTATE SL002, that would
-- match a subscription's filter against a sealed payload (a JSON string,
-- where a clear one is an object): Postgres cannot read it, so the caller
-- routes those events again where the filter is matched in Go
-- (fanout.insertRouted).
-- +goose StatementBegin
CREATE FUNCTION sluice_sealed_payload() RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a filter met a sealed payload' USING ERRCODE = 'SL002';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION sluice_sealed_payload();
DROP TABLE tenant_data_keys;
