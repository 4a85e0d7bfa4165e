-- name: CreateDashboardSession :exec
INSERT INTO dashboard_sessions (token_hash, tenant_id, api_key_id, member_id, consumer_id, read_only, expires_at)
VALUES (@token_hash, @tenant_id, sqlc.narg(api_key_id), sqlc.narg(member_id), sqlc.narg(consumer_id), @read_only, @expires_at);

-- DashboardSession loads a live session: not expired, its tenant not
-- disabled, and its API key neither revoked (the row would be gone) nor
-- expired. A portal session has a consumer (revoking the portal deletes the
-- row) instead of a key; a member's session has the member, whose role is
-- read here on every request.
-- name: DashboardSession :one
SELECT sqlc.embed(t), s.api_key_id, k.name AS api_key_name, s.expires_at,
    s.consumer_id, c.uid AS consumer_uid, c.name AS consumer_name, s.read_only,
    s.member_id, m.email AS member_email, m.role AS member_role
FROM dashboard_sessions s
JOIN tenants t ON t.id = s.tenant_id
LEFT JOIN api_keys k ON k.id = s.api_key_id
LEFT JOIN consumers c ON c.id = s.consumer_id
LEFT JOIN members m ON m.id = s.member_id
WHERE s.token_hash = @token_hash
  AND s.expires_at > now()
  AND (k.id IS NOT NULL OR c.id IS NOT NULL OR m.id IS NOT NULL)
  AND (k.expires_at IS NULL OR k.expires_at > now())
  AND t.disabled_at IS NULL;

-- name: DeleteDashboardSession :exec
DELETE FROM dashboard_sessions WHERE token_hash = @token_hash;

-- name: DeleteExpiredDashboardSessions :exec
DELETE FROM dashboard_sessions WHERE tenant_id = @tenant_id AND expires_at <= now();

-- name: DeleteTenantDashboardSessions :exec
DELETE FROM dashboard_sessions WHERE tenant_id = @tenant_id;

-- name: DeleteMemberDashboardSessions :exec
DELETE FROM dashboard_sessions WHERE member_id = @member_id;
