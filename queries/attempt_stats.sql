-- name: AttemptStats :many
-- One endpoint's attempts in [since, until), per bucket of bucket_seconds
-- counted from since: how many succeeded (2xx), were throttled (429) or
-- failed (anything else, no response included), and the median and 95th
-- percentile latency. Buckets without attempts are not returned. It reads
-- only delivery_attempts_endpoint_at_idx (00012_attempt_stats_index.sql),
-- whatever the size of the table: TestAttemptStatsPlan.
-- The attempts of deliveries past the tenant's own retention
-- (00042_tenant_retention.sql) are not counted, as no read shows those
-- deliveries. An attempt's delivery_id is a UUIDv7 of the delivery's
-- creation, so one created since both of the tenant's cutoffs is kept
-- whatever its status, with two comparisons; only an older one is looked
-- up in deliveries, by its key (a scalar subquery, which the planner
-- cannot turn into a hash of all the tenant's deliveries). A tenant without a retention of its own has no cutoff
-- (the nil UUID, -infinity) and no look-up is made.
SELECT date_bin(make_interval(secs => @bucket_seconds::int), a.at, @since::timestamptz)::timestamptz AS bucket,
       count(*) FILTER (WHERE a.status_code BETWEEN 200 AND 299) AS delivered,
       count(*) FILTER (WHERE a.status_code = 429) AS throttled,
       count(*) FILTER (WHERE a.status_code IS NULL OR NOT (a.status_code BETWEEN 200 AND 299 OR a.status_code = 429)) AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.latency_ms)::float8 AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY a.latency_ms)::float8 AS p95_ms
FROM delivery_attempts a
WHERE a.endpoint_id = @endpoint_id AND a.at >= @since::timestamptz AND a.at < @until::timestamptz
  AND ((a.delivery_id >= (SELECT sluice_delivered_from(@tenant_id))
        AND to_timestamp(sluice_uuid_ms(a.delivery_id) / 1000.0) >= (SELECT sluice_dead_from(@tenant_id)))
       OR coalesce((SELECT sluice_kept_delivery(d.status, d.id, d.updated_at,
                                                (SELECT sluice_delivered_from(@tenant_id)), (SELECT sluice_dead_from(@tenant_id)))
                    FROM deliveries d
                    WHERE d.id = a.delivery_id AND d.event_id = a.event_id AND d.tenant_id = @tenant_id), false))
GROUP BY 1
ORDER BY 1;
