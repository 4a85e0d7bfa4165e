-- +goose Up

-- A tenant is a company that sends webhooks to its own customers.
CREATE TABLE tenants (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    alert_email text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored only as a SHA-256 hash; prefix is kept to recognise a key.
CREATE TABLE api_keys (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    prefix     text NOT NULL,
    key_hash   bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_tenant_id_idx ON api_keys (tenant_id);

-- An endpoint is a receiver URL. Signing secrets are encrypted at rest; during
-- a rotation the previous secret keeps signing until previous_secret_expires_at.
CREATE TABLE endpoints (
    id                         uuid PRIMARY KEY,
    tenant_id                  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url                        text NOT NULL,
    description                text NOT NULL DEFAULT '',
    rate_limit_per_second      integer CHECK (rate_limit_per_second > 0),
    rate_limit_per_minute      integer CHECK (rate_limit_per_minute > 0),
    rate_limit_burst           integer CHECK (rate_limit_burst > 0),
    max_in_flight              integer NOT NULL DEFAULT 10 CHECK (max_in_flight > 0),
    headers                    jsonb NOT NULL DEFAULT '{}',
    disabled                   boolean NOT NULL DEFAULT false,
    secret_enc                 bytea NOT NULL,
    previous_secret_enc        bytea,
    previous_secret_expires_at timestamptz,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CHECK (rate_limit_per_second IS NULL OR rate_limit_per_minute IS NULL)
);
CREATE INDEX endpoints_tenant_id_id_idx ON endpoints (tenant_id, id);

-- A subscription routes event types (exact, "prefix.*" or "*") to an endpoint.
CREATE TABLE subscriptions (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    endpoint_id uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_types text[] NOT NULL CHECK (cardinality(event_types) > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subscriptions_tenant_id_id_idx ON subscriptions (tenant_id, id);
CREATE INDEX subscriptions_endpoint_id_idx ON subscriptions (endpoint_id);

-- +goose Down
DROP TABLE subscriptions;
DROP TABLE endpoints;
DROP TABLE api_keys;
DROP TABLE tenants;
