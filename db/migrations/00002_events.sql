-- +goose Up

-- sluice_uuidv7 makes time-ordered ids (RFC 9562 version 7) inside SQL, as
-- the application does, for rows created in bulk by one statement.
-- +goose StatementBegin
CREATE FUNCTION sluice_uuidv7() RETURNS uuid AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$ LANGUAGE sql VOLATILE;
-- +goose StatementEnd

-- An event as the tenant posted it. The payload is kept byte for byte (json,
-- not jsonb), so what is delivered is exactly what was accepted.
CREATE TABLE events (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    type            text NOT NULL,
    payload         json NOT NULL,
    coalesce_key    text,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_tenant_id_id_idx ON events (tenant_id, id);
CREATE UNIQUE INDEX events_idempotency_key_idx ON events (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- One delivery per (event, endpoint); replays add rows linked by
-- replayed_from. This table is each endpoint's queue: a delivery is queued
-- while its status is pending or failed, and due at next_attempt_at.
--
-- Inserting a delivery takes a KEY SHARE lock on its endpoint row (the
-- foreign key); the dispatcher's final check takes FOR UPDATE on the same
-- row. That conflict is what keeps a delivery from being committed unseen
-- while the endpoint's dispatch job decides it has nothing left to do.
CREATE TABLE deliveries (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_id        uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id     uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_type      text NOT NULL,
    coalesce_key    text,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed', 'dead')),
    attempt_count   integer NOT NULL DEFAULT 0,
    -- failure_count counts the attempts that spend the retry budget: 429s do not.
    failure_count   integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    replayed_from   uuid REFERENCES deliveries (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX deliveries_event_endpoint_idx ON deliveries (event_id, endpoint_id)
    WHERE replayed_from IS NULL;
CREATE INDEX deliveries_queue_idx ON deliveries (endpoint_id, next_attempt_at)
    WHERE status IN ('pending', 'failed');
CREATE INDEX deliveries_coalesce_idx ON deliveries (endpoint_id, coalesce_key, event_type)
    WHERE coalesce_key IS NOT NULL;
CREATE INDEX deliveries_tenant_id_id_idx ON deliveries (tenant_id, id);
CREATE INDEX deliveries_endpoint_id_id_idx ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_event_id_idx ON deliveries (event_id);
CREATE INDEX deliveries_retention_idx ON deliveries (updated_at) WHERE status = 'delivered';

-- Every attempt of a delivery, 429s included.
CREATE TABLE delivery_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    at            timestamptz NOT NULL,
    status_code   integer,
    error         text,
    latency_ms    integer NOT NULL,
    response_body text
);
CREATE INDEX delivery_attempts_delivery_id_idx ON delivery_attempts (delivery_id, id);

-- +goose Down
DROP TABLE delivery_attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP FUNCTION sluice_uuidv7();
