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

-- Every email to an endpoint's owner tells of one operational event: the
-- row keeps the event's type and payload, and notify renders the email
-- from them, one template per type. sent_at marks the email sent, so a
-- retried job never sends one twice.
ALTER TABLE circuit_alerts RENAME TO alerts;
ALTER INDEX circuit_alerts_pkey RENAME TO alerts_pkey;
ALTER INDEX circuit_alerts_endpoint_id_idx RENAME TO alerts_endpoint_id_idx;
ALTER TABLE alerts ADD COLUMN event_type text, ADD COLUMN payload jsonb;
UPDATE alerts a SET
    event_type = CASE
        WHEN a.kind = 'disabled' THEN 'sluice.endpoint.disabled'
        WHEN a.opened THEN 'sluice.endpoint.circuit_opened'
        ELSE 'sluice.endpoint.circuit_closed' END,
    payload = jsonb_strip_nulls(jsonb_build_object(
        'endpoint_id', a.endpoint_id, 'url', e.url, 'reason', CASE
            WHEN a.kind = 'disabled' THEN a.reason
            WHEN a.opened THEN 'failures'
            ELSE 'probe_succeeded' END,
        'last_error', nullif(a.last_error, ''), 'failures', nullif(a.failures, 0),
        'next_probe_at', a.next_probe_at)) || jsonb_build_object('consumer', e.consumer)
FROM endpoints e WHERE e.id = a.endpoint_id;
ALTER TABLE alerts
    ALTER COLUMN event_type SET NOT NULL, ALTER COLUMN payload SET NOT NULL,
    DROP COLUMN opened, DROP COLUMN last_error, DROP COLUMN failures,
    DROP COLUMN next_probe_at, DROP COLUMN kind, DROP COLUMN reason;

-- +goose Down
DELETE FROM alerts WHERE event_type NOT IN
    ('sluice.endpoint.disabled', 'sluice.endpoint.circuit_opened', 'sluice.endpoint.circuit_closed');
ALTER TABLE alerts
    ADD COLUMN opened boolean NOT NULL DEFAULT false,
    ADD COLUMN last_error text NOT NULL DEFAULT '',
    ADD COLUMN failures integer NOT NULL DEFAULT 0,
    ADD COLUMN next_probe_at timestamptz,
    ADD COLUMN kind text NOT NULL DEFAULT 'circuit' CHECK (kind IN ('circuit', 'disabled')),
    ADD COLUMN reason text;
UPDATE alerts SET
    opened = event_type = 'sluice.endpoint.circuit_opened',
    kind = CASE WHEN event_type = 'sluice.endpoint.disabled' THEN 'disabled' ELSE 'circuit' END,
    reason = CASE WHEN event_type = 'sluice.endpoint.disabled' THEN payload ->> 'reason' END,
    last_error = coalesce(payload ->> 'last_error', ''),
    failures = coalesce((payload ->> 'failures')::integer, 0),
    next_probe_at = (payload ->> 'next_probe_at')::timestamptz;
ALTER TABLE alerts DROP COLUMN event_type, DROP COLUMN payload;
ALTER INDEX alerts_endpoint_id_idx RENAME TO circuit_alerts_endpoint_id_idx;
ALTER INDEX alerts_pkey RENAME TO circuit_alerts_pkey;
ALTER TABLE alerts RENAME TO circuit_alerts;
DELETE FROM sweeps WHERE name = 'backlog';
DROP INDEX endpoints_backlog_alert_idx;
ALTER TABLE endpoints
    DROP COLUMN backlog_alert_queued, DROP COLUMN backlog_alert_oldest_seconds, DROP COLUMN backlog_alerted_at;
