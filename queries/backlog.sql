-- name: BacklogsToCheck :many
-- A page of the endpoints with a backlog alert set, enabled, each with as
-- much of its backlog as the check needs: its queued deliveries counted up
-- to the queued threshold (one, without one), and how long the first of
-- them has been due (waited, in seconds; negative while none is due, zero
-- with none queued). Each reads only the first entries of its claim index
-- (deliveries_claim_idx), in next_attempt_at order.
SELECT e.id, e.backlog_alert_queued, e.backlog_alert_oldest_seconds,
    (e.backlog_alerted_at IS NOT NULL)::boolean AS alerted, b.queued, b.waited
FROM endpoints e
CROSS JOIN LATERAL (
    SELECT count(*) AS queued,
        coalesce(extract(epoch FROM now() - min(q.next_attempt_at)), 0)::float8 AS waited
    FROM (
        SELECT d.next_attempt_at FROM deliveries d
        WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed')
        ORDER BY d.next_attempt_at
        LIMIT coalesce(e.backlog_alert_queued, 1)
    ) q
) b
WHERE (e.backlog_alert_queued IS NOT NULL OR e.backlog_alert_oldest_seconds IS NOT NULL)
  AND NOT e.disabled
  AND e.id > @after
ORDER BY e.id
LIMIT @max_rows;

-- name: RaiseBacklogAlert :one
-- Marks the endpoint's backlog alerted, returning what the alert reports;
-- no row when it was alerted already (or is disabled or gone).
UPDATE endpoints e SET backlog_alerted_at = now()
WHERE e.id = @id AND e.backlog_alerted_at IS NULL AND NOT e.disabled
RETURNING e.tenant_id, e.url, e.consumer, e.backlog_alert_queued, e.backlog_alert_oldest_seconds,
    (SELECT count(*) FROM deliveries d
     WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'failed')) AS queued;

-- name: RearmBacklogAlerts :exec
-- The endpoints whose backlog fell below half of every threshold may alert
-- again.
UPDATE endpoints SET backlog_alerted_at = NULL
WHERE id = ANY(@ids::uuid[]) AND backlog_alerted_at IS NOT NULL;
