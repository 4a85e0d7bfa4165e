-- +goose Up

-- Backlog alerts: an endpoint may set a threshold on its queued deliveries
-- (backlog_alert_queued) and/or on how long its oldest due delivery has
-- waited (backlog_alert_oldest_seconds). backlog_alerted_at is when the
-- owner was last told; it is cleared once the backlog falls below half of
-- every threshold set, and only then can another alert go.
ALTER TABLE endpoints
    ADD COLUMN backlog_alert_queued         integer CHECK (backlog_alert_queued > 0),
    ADD COLUMN backlog_alert_oldest_seconds integer CHECK (backlog_alert_oldest_seconds > 0),
    ADD COLUMN backlog_alerted_at           timestamptz;

-- The sweep's backlog check walks only the endpoints with an alert set.
CREATE INDEX endpoints_backlog_alert_idx ON endpoints (id)
    WHERE backlog_alert_queued IS NOT NULL OR backlog_alert_oldest_seconds IS NOT NULL;

-- The sweep's turn to check backlogs (store.ClaimSweep).
INSERT INTO sweeps (name, swept_at) VALUES ('backlog', '-infinity');

-- A backlog alert's email (kind backlog) renders from the operational
-- event's payload, kept on the row.
ALTER TABLE circuit_alerts DROP CONSTRAINT circuit_alerts_kind_check;
ALTER TABLE circuit_alerts
    ADD CONSTRAINT circuit_alerts_kind_check CHECK (kind IN ('circuit', 'disabled', 'backlog')),
    ADD COLUMN payload jsonb;

-- +goose Down
DELETE FROM sweeps WHERE name = 'backlog';
DELETE FROM circuit_alerts WHERE kind = 'backlog';
ALTER TABLE circuit_alerts DROP COLUMN payload;
ALTER TABLE circuit_alerts DROP CONSTRAINT circuit_alerts_kind_check;
ALTER TABLE circuit_alerts ADD CONSTRAINT circuit_alerts_kind_check CHECK (kind IN ('circuit', 'disabled'));
DROP INDEX endpoints_backlog_alert_idx;
ALTER TABLE endpoints
    DROP COLUMN backlog_alert_queued, DROP COLUMN backlog_alert_oldest_seconds, DROP COLUMN backlog_alerted_at;
