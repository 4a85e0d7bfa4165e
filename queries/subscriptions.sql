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
-- read as jsonb once. Each pair finds its payload and its filter by array
-- subscript, not by a join: it runs in the routing transaction, where
-- IndexProbes turn hash joins off, and a nested loop over the pairs would
-- compare every pair with every event and every subscription. An event or
-- subscription that is gone leaves a NULL at its index, which matches
-- nothing.
WITH doc AS MATERIALIZED (
    SELECT array_agg(ev.payload::jsonb ORDER BY e.idx) AS docs
    FROM unnest(@event_ids::uuid[]) WITH ORDINALITY AS e(id, idx)
    LEFT JOIN events ev ON ev.id = e.id AND ev.id = ANY(@event_ids::uuid[])
), sub AS MATERIALIZED (
    SELECT array_agg(s.filter_path ORDER BY u.idx) AS paths
    FROM unnest(@subscription_ids::uuid[]) WITH ORDINALITY AS u(id, idx)
    LEFT JOIN subscriptions s ON s.id = u.id
)
SELECT p.event_idx::int AS event_idx, p.subscription_idx::int AS subscription_idx
FROM (SELECT unnest(@pair_events::int[]) AS event_idx, unnest(@pair_subscriptions::int[]) AS subscription_idx) p, doc, sub
WHERE jsonb_path_match(doc.docs[p.event_idx], sub.paths[p.subscription_idx], '{}', true);

-- name: SubscriptionFilters :many
-- The filters of subscriptions, as written, for matching sealed payloads
-- in Go (fanout.routes.applyFilters): Postgres cannot read those.
SELECT id, filter FROM subscriptions WHERE id = ANY(@ids::uuid[]) AND filter IS NOT NULL;
