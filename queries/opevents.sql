-- name: DisableEndpoint :execrows
-- Disables an endpoint Sluice gave up on (reason gone or failing), in the
-- record step that decided it; a no-op for one disabled already.
UPDATE endpoints SET disabled = true, disabled_reason = @reason, updated_at = now()
WHERE id = @id AND NOT disabled;

-- name: InsertDisabledAlert :exec
-- The owner's email of an endpoint Sluice disabled (notify.AlertWorker).
INSERT INTO circuit_alerts (id, tenant_id, endpoint_id, opened, kind, reason, last_error)
VALUES (@id, @tenant_id, @endpoint_id, false, 'disabled', @reason, @last_error);
