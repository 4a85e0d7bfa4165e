-- +goose Up

-- An endpoint's mutual TLS (the delivery option tls): the certificate and
-- CAs live in the options document; the private key, sealed with the
-- store's key, in tls_key_enc, set exactly while the option is.
-- tls_expiry_noticed is the not_after of the certificate whose expiry the
-- owner was told of (sluice.endpoint.certificate_expiring): a new
-- certificate, with its own not_after, is watched afresh.
ALTER TABLE endpoints
    ADD COLUMN tls_key_enc        bytea,
    ADD COLUMN tls_expiry_noticed timestamptz;

-- The sweep's certificate check walks only the endpoints with a key.
CREATE INDEX endpoints_tls_idx ON endpoints (id) WHERE tls_key_enc IS NOT NULL;

-- The sweep's turn to check certificates.
INSERT INTO sweeps (name, swept_at) VALUES ('certificates', '-infinity');

-- +goose Down
DELETE FROM sweeps WHERE name = 'certificates';
DROP INDEX endpoints_tls_idx;
ALTER TABLE endpoints DROP COLUMN tls_expiry_noticed, DROP COLUMN tls_key_enc;
