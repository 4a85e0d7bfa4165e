-- name: InsertEffectiveRateChange :exec
-- A slowdown of the endpoint's effective rate; its rows before
-- expire_before go (the dashboard draws the last hour).
WITH expired AS (
    DELETE FROM effective_rate_changes x
    WHERE x.endpoint_id = @endpoint_id AND x.at < @expire_before
)
INSERT INTO effective_rate_changes (endpoint_id, at, rate)
VALUES (@endpoint_id, @changed_at, @rate)
ON CONFLICT (endpoint_id, at) DO UPDATE SET rate = EXCLUDED.rate;

-- name: EffectiveRateChanges :many
-- The endpoint's slowdowns since since, and the last one before it (the
-- rate since begins from), oldest first.
SELECT c.at, c.rate FROM effective_rate_changes c
WHERE c.endpoint_id = @endpoint_id
  AND c.at >= coalesce((SELECT max(b.at) FROM effective_rate_changes b
                        WHERE b.endpoint_id = @endpoint_id AND b.at <= @since::timestamptz), @since::timestamptz)
ORDER BY c.at;
