-- name: AttemptStats :many
-- One endpoint's attempts in [since, until), per bucket of bucket_seconds
-- counted from since: how many succeeded (2xx), were throttled (429) or
-- failed (anything else, no response included), and the median and 95th
-- percentile latency. Buckets without attempts are not returned. It reads
-- only delivery_attempts_endpoint_at_idx (00012_attempt_stats_index.sql),
-- whatever the size of the table: TestAttemptStatsPlan.
SELECT date_bin(make_interval(secs => @bucket_seconds::int), a.at, @since::timestamptz)::timestamptz AS bucket,
       count(*) FILTER (WHERE a.status_code BETWEEN 200 AND 299) AS delivered,
       count(*) FILTER (WHERE a.status_code = 429) AS throttled,
       count(*) FILTER (WHERE a.status_code IS NULL OR NOT (a.status_code BETWEEN 200 AND 299 OR a.status_code = 429)) AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.latency_ms)::float8 AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY a.latency_ms)::float8 AS p95_ms
FROM delivery_attempts a
WHERE a.endpoint_id = @endpoint_id AND a.at >= @since::timestamptz AND a.at < @until::timestamptz
GROUP BY 1
ORDER BY 1;
