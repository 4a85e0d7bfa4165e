-- +goose Up
-- An endpoint's dead deliveries, for the count of those "Replay all"
-- would queue (CountReplayable) and the statement that stages them
-- (StageReplay): they read this index alone, whatever the number of the
-- endpoint's other deliveries and of other endpoints' dead ones; in the
-- order of their ids, so a count that stops at its LIMIT reads no further
-- (deliveries_dead_idx, in updated_at order, would need a sort). Only
-- deliveries that die get an entry, so posting and dispatching pay none.
CREATE INDEX deliveries_endpoint_dead_idx ON deliveries (endpoint_id, id) WHERE status = 'dead';

-- +goose Down
DROP INDEX deliveries_endpoint_dead_idx;
