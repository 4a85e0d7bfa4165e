-- name: CreateTenant :one
INSERT INTO tenants (id, name, alert_email)
VALUES (@id, @name, @alert_email)
RETURNING *;

-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;
