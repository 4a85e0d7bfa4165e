-- name: UpsertEventType :one
INSERT INTO event_types (id, tenant_id, name, description, example, schema, deprecated)
VALUES (@id, @tenant_id, @name, @description, @example, @schema, @deprecated)
ON CONFLICT (tenant_id, name) DO UPDATE
SET description = EXCLUDED.description, example = EXCLUDED.example,
    schema = EXCLUDED.schema, deprecated = EXCLUDED.deprecated, updated_at = now()
RETURNING sqlc.embed(event_types), (xmax = 0)::boolean AS inserted;

-- name: GetEventType :one
SELECT * FROM event_types WHERE tenant_id = @tenant_id AND name = @name;

-- name: ListEventTypes :many
SELECT * FROM event_types
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: DeleteEventType :execrows
DELETE FROM event_types WHERE tenant_id = @tenant_id AND name = @name;

-- EventSchemas returns the schemas of a tenant's event types that have one,
-- for the ingest validator's cache.
-- name: EventSchemas :many
SELECT name, schema, updated_at FROM event_types
WHERE tenant_id = @tenant_id AND schema IS NOT NULL;
