-- name: CreateDashboardSession :exec
INSERT INTO dashboard_sessions (token_hash, tenant_id, api_key_id, expires_at)
VALUES (@token_hash, @tenant_id, @api_key_id, @expires_at);

-- DashboardSession loads a live session: not expired, its API key neither
-- revoked (the row would be gone) nor expired, its tenant not disabled.
-- name: DashboardSession :one
SELECT t.id, t.name, t.alert_email, t.created_at, s.api_key_id, s.expires_at
FROM dashboard_sessions s
JOIN api_keys k ON k.id = s.api_key_id
JOIN tenants t ON t.id = s.tenant_id
WHERE s.token_hash = @token_hash
  AND s.expires_at > now()
  AND (k.expires_at IS NULL OR k.expires_at > now())
  AND t.disabled_at IS NULL;

-- name: DeleteDashboardSession :exec
DELETE FROM dashboard_sessions WHERE token_hash = @token_hash;

-- name: DeleteExpiredDashboardSessions :exec
DELETE FROM dashboard_sessions WHERE tenant_id = @tenant_id AND expires_at <= now();

-- name: DeleteTenantDashboardSessions :exec
DELETE FROM dashboard_sessions WHERE tenant_id = @tenant_id;
