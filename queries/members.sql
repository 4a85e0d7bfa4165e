-- name: InsertMember :one
INSERT INTO members (id, tenant_id, email, role)
VALUES (@id, @tenant_id, @email, @role)
RETURNING *;

-- name: ListMembers :many
SELECT * FROM members
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: GetMember :one
SELECT * FROM members WHERE tenant_id = @tenant_id AND id = @id;

-- name: UpdateMemberRole :one
UPDATE members SET role = @role, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: DeleteMember :execrows
DELETE FROM members WHERE tenant_id = @tenant_id AND id = @id;

-- MemberForMail is what the email of a member's link needs: the member and
-- its tenant's name.
-- name: MemberForMail :one
SELECT m.id, m.email, m.role, (m.password_hash IS NOT NULL)::boolean AS active, t.name AS tenant_name
FROM members m JOIN tenants t ON t.id = m.tenant_id
WHERE m.id = @id;

-- MemberByEmail finds a member to sign in, or to send a reset link to, by
-- its email in any case, with its tenant.
-- name: MemberByEmail :one
SELECT sqlc.embed(m), sqlc.embed(t)
FROM members m JOIN tenants t ON t.id = m.tenant_id
WHERE lower(m.email) = lower(@email);

-- name: InsertMemberToken :exec
INSERT INTO member_tokens (token_hash, member_id, purpose, expires_at)
VALUES (@token_hash, @member_id, @purpose, @expires_at);

-- MemberByToken is the member a link's token sets the password of, while
-- the token is unused and unexpired at @now.
-- name: MemberByToken :one
SELECT m.id, m.email, (m.password_hash IS NOT NULL)::boolean AS active, k.purpose
FROM member_tokens k JOIN members m ON m.id = k.member_id
WHERE k.token_hash = @token_hash AND k.expires_at > @now;

-- UseMemberToken consumes a token, expired or not: a link works once.
-- name: UseMemberToken :one
DELETE FROM member_tokens WHERE token_hash = @token_hash
RETURNING member_id, expires_at;

-- name: SetMemberPassword :one
UPDATE members SET password_hash = @password_hash, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: DeleteMemberTokens :exec
DELETE FROM member_tokens WHERE member_id = @member_id;
