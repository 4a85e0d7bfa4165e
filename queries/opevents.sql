-- name: DisableEndpoint :execrows
-- Disables an endpoint Sluice gave up on (reason gone or failing), in the
-- record step that decided it; a no-op for one disabled already.
UPDATE endpoints SET disabled = true, disabled_reason = @reason, updated_at = now()
WHERE id = @id AND NOT disabled;

