-- name: CreateEndpoint :one
INSERT INTO endpoints (
    id, tenant_id, url, description,
    rate_limit_per_second, rate_limit_per_minute, rate_limit_burst,
    rate_limit_adaptive, rate_limit_min,
    backlog_alert_queued, backlog_alert_oldest_seconds,
    max_in_flight, headers, disabled, disabled_reason, secret_enc, consumer, ordering, options
) VALUES (
    @id, @tenant_id, @url, @description,
    @rate_limit_per_second, @rate_limit_per_minute, @rate_limit_burst,
    @rate_limit_adaptive, @rate_limit_min,
    sqlc.narg(backlog_alert_queued), sqlc.narg(backlog_alert_oldest_seconds),
    @max_in_flight, @headers, @disabled::boolean, CASE WHEN @disabled::boolean THEN 'manual' END,
    @secret_enc, sqlc.narg(consumer), @ordering, sqlc.narg(options)
)
RETURNING *;

-- name: GetEndpoint :one
SELECT sqlc.embed(e), t.throttled_until, t.reason AS throttle_reason,
    (SELECT count(*) FROM deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed')) AS queued_deliveries
FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
WHERE e.tenant_id = @tenant_id AND e.id = @id;

-- name: ListEndpoints :many
SELECT sqlc.embed(e), t.throttled_until, t.reason AS throttle_reason,
    (SELECT count(*) FROM deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed')) AS queued_deliveries
FROM endpoints e
LEFT JOIN destination_throttle t ON t.endpoint_id = e.id
WHERE e.tenant_id = @tenant_id
  AND (sqlc.narg(consumer)::text IS NULL OR e.consumer = sqlc.narg(consumer)::text)
  AND (sqlc.narg(after)::uuid IS NULL OR e.id < sqlc.narg(after)::uuid)
ORDER BY e.id DESC
LIMIT @max_rows;

-- UpdateEndpoint returns the endpoint's parked dispatch job, if any, so
-- that the change can wake it (a new rate limit may let it send now), and
-- whether it was disabled before, so that disabling or enabling it posts
-- its operational event (sluice.endpoint.disabled, .enabled). Disabling
-- by hand keeps the reason of an endpoint Sluice disabled already.
-- name: UpdateEndpoint :one
WITH old AS (
    SELECT o.id, o.disabled FROM endpoints o
    WHERE o.tenant_id = @tenant_id AND o.id = @id
    FOR NO KEY UPDATE
)
UPDATE endpoints e SET
    url = @url,
    description = @description,
    rate_limit_per_second = @rate_limit_per_second,
    rate_limit_per_minute = @rate_limit_per_minute,
    rate_limit_burst = @rate_limit_burst,
    rate_limit_adaptive = @rate_limit_adaptive,
    rate_limit_min = @rate_limit_min,
    backlog_alert_queued = sqlc.narg(backlog_alert_queued),
    backlog_alert_oldest_seconds = sqlc.narg(backlog_alert_oldest_seconds),
    -- without an alert there is nothing to re-arm
    backlog_alerted_at = CASE WHEN sqlc.narg(backlog_alert_queued)::integer IS NOT NULL
        OR sqlc.narg(backlog_alert_oldest_seconds)::integer IS NOT NULL THEN e.backlog_alerted_at END,
    max_in_flight = @max_in_flight,
    headers = @headers,
    disabled = @disabled::boolean,
    disabled_reason = CASE WHEN @disabled::boolean THEN coalesce(e.disabled_reason, 'manual') END,
    options = sqlc.narg(options),
    -- a new challenge asked for, a new URL to prove or verification
    -- turned on: unverified until the receiver answers one
    verified_at = CASE WHEN @reverify::boolean THEN NULL ELSE e.verified_at END,
    verification_error = CASE WHEN @reverify::boolean THEN NULL ELSE e.verification_error END,
    updated_at = now()
FROM old
WHERE e.id = old.id
RETURNING e.parked_job_id, old.disabled AS was_disabled, e.url AS new_url, e.consumer;

-- name: DeleteEndpoint :execrows
-- Its deliveries and subscriptions go by cascade; its attempts, which have
-- no foreign key (00014_time_partitions.sql), here.
WITH attempts AS (
    DELETE FROM delivery_attempts a USING endpoints e
    WHERE e.tenant_id = @tenant_id AND e.id = @id AND a.endpoint_id = e.id
)
DELETE FROM endpoints gone WHERE gone.tenant_id = @tenant_id AND gone.id = @id;

-- name: GetEndpointSecrets :one
SELECT secret_enc, previous_secret_enc, previous_secret_expires_at
FROM endpoints
WHERE tenant_id = @tenant_id AND id = @id;

-- name: RotateEndpointSecret :execrows
UPDATE endpoints SET
    previous_secret_enc = secret_enc,
    previous_secret_expires_at = @previous_expires_at,
    secret_enc = @secret_enc,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;
