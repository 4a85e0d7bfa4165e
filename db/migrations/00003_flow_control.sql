-- +goose Up

-- Per-endpoint flow control, kept on the endpoint row that every dispatch
-- step already locks: the token bucket (rate limit) and the circuit breaker.
ALTER TABLE endpoints
    ADD COLUMN bucket_tokens          double precision,
    ADD COLUMN bucket_at              timestamptz,
    ADD COLUMN circuit_state          text NOT NULL DEFAULT 'closed'
        CHECK (circuit_state IN ('closed', 'open', 'half_open')),
    ADD COLUMN consecutive_failures   integer NOT NULL DEFAULT 0,
    ADD COLUMN circuit_opened_at      timestamptz,
    ADD COLUMN circuit_next_probe_at  timestamptz,
    ADD COLUMN circuit_probe_ms       bigint,
    ADD COLUMN last_error             text,
    -- The dispatch job parked (snoozed) until a throttle or circuit lifts,
    -- so closing a circuit by hand can wake it early.
    ADD COLUMN parked_job_id          bigint;

-- An endpoint that answered 429 is throttled: nothing is sent to it until
-- throttled_until. The row goes away on the next success.
CREATE TABLE destination_throttle (
    endpoint_id      uuid PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    throttled_until  timestamptz NOT NULL,
    reason           text NOT NULL,
    consecutive_429s integer NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per circuit transition to tell the tenant about; sent_at marks
-- the email sent, so a retried job never sends one transition twice.
CREATE TABLE circuit_alerts (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    endpoint_id uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    opened      boolean NOT NULL,
    last_error  text NOT NULL DEFAULT '',
    failures    integer NOT NULL DEFAULT 0,
    next_probe_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX circuit_alerts_endpoint_id_idx ON circuit_alerts (endpoint_id);

-- +goose Down
DROP TABLE circuit_alerts;
DROP TABLE destination_throttle;
ALTER TABLE endpoints
    DROP COLUMN bucket_tokens, DROP COLUMN bucket_at, DROP COLUMN circuit_state,
    DROP COLUMN consecutive_failures, DROP COLUMN circuit_opened_at,
    DROP COLUMN circuit_next_probe_at, DROP COLUMN circuit_probe_ms,
    DROP COLUMN last_error, DROP COLUMN parked_job_id;
