-- name: LeaseAPITokens :one
-- Refills the tenant's shared API bucket from the time since it was last
-- used (at per_second, up to capacity), takes owed tokens from it whatever
-- it holds (charges made since the last call; the bucket may go into
-- debt), then grants up to want whole tokens of what is left, all under
-- the row's lock. It answers the tokens granted and those left; no
-- row means the tenant has no bucket yet (CreateAPIBucket).
-- The clock is the database's, so the processes' clocks do not matter.
-- The level (the bucket refilled, less what is owed) is written out twice,
-- for tokens and for granted: SET expressions cannot share it, and every
-- one of them reads the row as it was before this UPDATE (the latest
-- version, if a concurrent call changed it meanwhile). The time is one
-- clock_timestamp() for the whole statement; greatest keeps at from
-- going back when calls pass each other on the way to the lock. The
-- arguments are written sqlc.arg(...): "@x::float8 * y" is read as the
-- prefix operator @ applied to the product.
UPDATE api_buckets AS b
SET calls = b.calls + 1,
    at = greatest(b.at, c.ts),
    granted = greatest(0, least(sqlc.arg(want)::bigint, floor(
        least(sqlc.arg(capacity)::float8, b.tokens + sqlc.arg(per_second)::float8 * greatest(0, date_part('epoch', c.ts - b.at)))
        - sqlc.arg(owed)::float8 + 1e-9)::bigint)),
    tokens = least(sqlc.arg(capacity)::float8, b.tokens + sqlc.arg(per_second)::float8 * greatest(0, date_part('epoch', c.ts - b.at)))
        - sqlc.arg(owed)::float8
        - greatest(0, least(sqlc.arg(want)::bigint, floor(
            least(sqlc.arg(capacity)::float8, b.tokens + sqlc.arg(per_second)::float8 * greatest(0, date_part('epoch', c.ts - b.at)))
            - sqlc.arg(owed)::float8 + 1e-9)::bigint))
FROM (SELECT clock_timestamp() AS ts) AS c
WHERE b.tenant_id = sqlc.arg(tenant_id)
RETURNING b.granted, b.tokens;

-- name: CreateAPIBucket :exec
-- Makes the tenant's shared API bucket, full, unless another process just
-- did.
INSERT INTO api_buckets (tenant_id, tokens, at)
VALUES (@tenant_id, @capacity::float8, clock_timestamp())
ON CONFLICT (tenant_id) DO NOTHING;
