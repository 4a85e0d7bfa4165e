-- name: DueDeliveryStats :one
-- Deliveries due now and how long ago the oldest of them came due (0 when
-- none is), for /metrics.
-- It reads the due-queue index; its cost grows with the due backlog, which
-- a scrape every few seconds can afford.
SELECT count(*)::bigint AS due,
    coalesce(extract(epoch FROM now() - min(next_attempt_at)), 0)::float8 AS oldest_age_seconds
FROM deliveries
WHERE status IN ('pending', 'failed') AND next_attempt_at <= now();

-- name: EndpointsByState :many
-- Endpoints by the status the API shows (store.endpoint), for /metrics.
SELECT (CASE
    WHEN e.disabled THEN 'disabled'
    WHEN e.circuit_state IN ('open', 'half_open') THEN 'circuit_open'
    WHEN t.throttled_until > now() THEN 'throttled'
    ELSE 'active' END)::text AS state,
    count(*)::bigint AS n
FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
GROUP BY 1;
