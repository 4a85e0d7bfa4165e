-- +goose Up

-- A consumer is one of the tenant's own customers, named by the tenant's id
-- for it (uid). Endpoints may belong to one; events may be addressed to one.
-- portal_generation is part of every portal link signed for the consumer:
-- revoking the portal draws a new one, which voids every link at once.
CREATE TABLE consumers (
    id                uuid PRIMARY KEY,
    tenant_id         uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    uid               text NOT NULL,
    name              text NOT NULL DEFAULT '',
    alert_email       text,
    portal_generation uuid NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, uid)
);
CREATE INDEX consumers_tenant_id_id_idx ON consumers (tenant_id, id);

-- An endpoint belongs to at most one consumer, named by its uid and fixed at
-- creation, and goes with it (its subscriptions and deliveries cascade from
-- the endpoint).
ALTER TABLE endpoints
    ADD COLUMN consumer text,
    ADD FOREIGN KEY (tenant_id, consumer) REFERENCES consumers (tenant_id, uid) ON DELETE CASCADE;
CREATE INDEX endpoints_tenant_id_consumer_idx ON endpoints (tenant_id, consumer, id)
    WHERE consumer IS NOT NULL;

-- An event is addressed to one consumer (its uid; no foreign key: events
-- outlive a deleted consumer), to the tenant's own endpoints (no consumer),
-- or to every endpoint (broadcast).
ALTER TABLE events
    ADD COLUMN consumer  text,
    ADD COLUMN broadcast boolean NOT NULL DEFAULT false,
    ADD CHECK (NOT (broadcast AND consumer IS NOT NULL));

-- A portal session is a dashboard session scoped to one consumer, opened
-- with a portal link rather than an API key.
ALTER TABLE dashboard_sessions
    ALTER COLUMN api_key_id DROP NOT NULL,
    ADD COLUMN consumer_id uuid REFERENCES consumers (id) ON DELETE CASCADE,
    ADD COLUMN read_only   boolean NOT NULL DEFAULT false,
    ADD CHECK ((api_key_id IS NULL) <> (consumer_id IS NULL));
CREATE INDEX dashboard_sessions_consumer_id_idx ON dashboard_sessions (consumer_id)
    WHERE consumer_id IS NOT NULL;

-- The tenant's catalogue of event types. schema, when set, is a JSON Schema
-- (2020-12) every posted event of the type must satisfy.
CREATE TABLE event_types (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    example     jsonb,
    schema      jsonb,
    deprecated  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX event_types_tenant_id_id_idx ON event_types (tenant_id, id);

-- +goose Down
DROP TABLE event_types;
DROP INDEX dashboard_sessions_consumer_id_idx;
DELETE FROM dashboard_sessions WHERE consumer_id IS NOT NULL;
ALTER TABLE dashboard_sessions
    DROP COLUMN read_only,
    DROP COLUMN consumer_id,
    ALTER COLUMN api_key_id SET NOT NULL;
ALTER TABLE events
    DROP COLUMN broadcast,
    DROP COLUMN consumer;
ALTER TABLE endpoints DROP COLUMN consumer;
DROP TABLE consumers;
