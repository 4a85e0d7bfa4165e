-- name: GetCircuitAlert :one
-- The alert goes to the endpoint's owner: its consumer's alert address when
-- it has one, else the tenant's.
SELECT a.*, t.name AS tenant_name,
    coalesce(c.alert_email, t.alert_email)::text AS alert_email,
    e.url AS endpoint_url, e.consumer
FROM circuit_alerts a
JOIN tenants t ON t.id = a.tenant_id
JOIN endpoints e ON e.id = a.endpoint_id
LEFT JOIN consumers c ON c.tenant_id = e.tenant_id AND c.uid = e.consumer
WHERE a.id = @id;

-- name: MarkCircuitAlertSent :exec
UPDATE circuit_alerts SET sent_at = now() WHERE id = @id;
