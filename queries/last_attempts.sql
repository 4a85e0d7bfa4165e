-- name: LastAttempts :many
-- The newest attempt of each of the deliveries, for the lists that show why
-- a delivery failed. The deliveries' event ids let Postgres read only their
-- weeks' partitions.
SELECT DISTINCT ON (a.delivery_id) a.*
FROM delivery_attempts a
WHERE a.delivery_id = ANY(@delivery_ids::uuid[]) AND a.event_id = ANY(@event_ids::uuid[])
ORDER BY a.delivery_id, a.id DESC;
