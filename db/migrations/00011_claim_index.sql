-- +goose Up

-- The claim reads an endpoint's due deliveries ORDER BY next_attempt_at, id
-- LIMIT n. The queue index ended at next_attempt_at, so without fresh
-- statistics Postgres could sort a whole backlog (joining each row to its
-- event) to return ten rows. With id in the index the order is the index's
-- own: the claim reads n entries, whatever the backlog.
CREATE INDEX deliveries_claim_idx ON deliveries (endpoint_id, next_attempt_at, id)
    WHERE status IN ('pending', 'failed');
DROP INDEX deliveries_queue_idx;

-- +goose Down
CREATE INDEX deliveries_queue_idx ON deliveries (endpoint_id, next_attempt_at)
    WHERE status IN ('pending', 'failed');
DROP INDEX deliveries_claim_idx;
