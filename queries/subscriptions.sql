-- name: CreateSubscription :one
-- filter and filter_path are both given or both NULL: a filter's JSON and
-- its compiled jsonpath (filter.Filter).
INSERT INTO subscriptions (id, tenant_id, endpoint_id, event_types, filter, filter_path)
SELECT @id, e.tenant_id, e.id, @event_types::text[], sqlc.narg(filter)::json, sqlc.narg(filter_path)::jsonpath
FROM endpoints e
WHERE e.tenant_id = @tenant_id AND e.id = @endpoint_id
RETURNING *;

-- name: GetSubscription :one
SELECT * FROM subscriptions WHERE tenant_id = @tenant_id AND id = @id;

-- name: ListSubscriptions :many
SELECT * FROM subscriptions
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(endpoint_id)::uuid IS NULL OR endpoint_id = sqlc.narg(endpoint_id)::uuid)
  AND (sqlc.narg(after)::uuid IS NULL OR id < sqlc.narg(after)::uuid)
ORDER BY id DESC
LIMIT @max_rows;

-- name: DeleteSubscription :execrows
DELETE FROM subscriptions WHERE tenant_id = @tenant_id AND id = @id;

-- name: DeleteEndpointSubscriptions :exec
DELETE FROM subscriptions WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id;

-- name: MatchFilters :many
-- Routing's filter step for events already stored (fanout.planFanOut):
-- of the pairs (event, subscription with a filter), given as 1-based
-- indexes into event_ids and subscription_ids, those whose filter matches
-- the event's payload, evaluated as InsertRoutedEvents does, each payload
-- read as jsonb once.
WITH doc AS MATERIALIZED (
    SELECT e.event_idx, ev.payload::jsonb AS doc
    FROM (SELECT unnest(@event_ids::uuid[]) AS id, generate_subscripts(@event_ids::uuid[], 1) AS event_idx) e
    JOIN events ev ON ev.id = e.id
    WHERE ev.id = ANY(@event_ids::uuid[])
), sub AS MATERIALIZED (
    SELECT u.subscription_idx, s.filter_path
    FROM (SELECT unnest(@subscription_ids::uuid[]) AS id, generate_subscripts(@subscription_ids::uuid[], 1) AS subscription_idx) u
    JOIN subscriptions s ON s.id = u.id
    WHERE s.filter_path IS NOT NULL
)
SELECT p.event_idx::int AS event_idx, p.subscription_idx::int AS subscription_idx
FROM (SELECT unnest(@pair_events::int[]) AS event_idx, unnest(@pair_subscriptions::int[]) AS subscription_idx) p
JOIN doc d ON d.event_idx = p.event_idx
JOIN sub s ON s.subscription_idx = p.subscription_idx
WHERE jsonb_path_match(d.doc, s.filter_path, '{}', true);
