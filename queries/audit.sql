-- name: InsertAuditEntry :exec
INSERT INTO audit_log (id, tenant_id, at, actor_type, actor_id, actor_name, action, object_id, source_ip, changed)
VALUES (@id, @tenant_id, @at, @actor_type, @actor_id, @actor_name, @action, @object_id, @source_ip, @changed);

-- ListAuditEntries reads a tenant's log newest first, from before the
-- cursor's id, with optional filters.
-- name: ListAuditEntries :many
SELECT id, at, actor_type, actor_id, actor_name, action, object_id, source_ip, changed
FROM audit_log
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(before_id)::uuid IS NULL OR id < sqlc.narg(before_id)::uuid)
  AND (sqlc.narg(action)::text IS NULL OR action = sqlc.narg(action)::text)
  AND (sqlc.narg(object_id)::text IS NULL OR object_id = sqlc.narg(object_id)::text)
  AND (sqlc.narg(actor_id)::text IS NULL OR actor_id = sqlc.narg(actor_id)::text)
  AND (sqlc.narg(since)::timestamptz IS NULL OR at >= sqlc.narg(since)::timestamptz)
  AND (sqlc.narg(until)::timestamptz IS NULL OR at < sqlc.narg(until)::timestamptz)
ORDER BY id DESC
LIMIT @lim;

-- name: EnsureAuditMonth :one
SELECT sluice_ensure_audit_month(@at::timestamptz);

-- name: DropAuditMonths :one
SELECT sluice_drop_audit_months(@before::timestamptz);
