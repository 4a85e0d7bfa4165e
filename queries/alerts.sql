-- name: GetCircuitAlert :one
SELECT a.*, t.name AS tenant_name, t.alert_email, e.url AS endpoint_url
FROM circuit_alerts a
JOIN tenants t ON t.id = a.tenant_id
JOIN endpoints e ON e.id = a.endpoint_id
WHERE a.id = @id;

-- name: MarkCircuitAlertSent :exec
UPDATE circuit_alerts SET sent_at = now() WHERE id = @id;
