-- name: InsertAlert :exec
-- The email telling an endpoint's owner of an operational event
-- (notify.AlertWorker renders it from the event's type and payload).
INSERT INTO alerts (id, tenant_id, endpoint_id, event_type, payload)
VALUES (@id, @tenant_id, @endpoint_id, @event_type, @payload);

-- name: GetAlert :one
-- The alert goes to the endpoint's owner: its consumer's alert address when
-- it has one, else the tenant's.
SELECT a.*, t.name AS tenant_name,
    coalesce(c.alert_email, t.alert_email)::text AS alert_email,
    e.url AS endpoint_url
FROM alerts a
JOIN tenants t ON t.id = a.tenant_id
JOIN endpoints e ON e.id = a.endpoint_id
LEFT JOIN consumers c ON c.tenant_id = e.tenant_id AND c.uid = e.consumer
WHERE a.id = @id;

-- name: MarkAlertSent :exec
UPDATE alerts SET sent_at = now() WHERE id = @id;
