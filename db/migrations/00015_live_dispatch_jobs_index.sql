-- +goose Up

-- The sweeper asks, for each endpoint with deliveries due, whether it has a
-- live dispatch job. River's GIN index on job arguments answers with every
-- dispatch job the endpoint ever had that River has not yet cleaned up (a
-- day of them by default), so that question grew with history: hundreds of
-- milliseconds a sweep at 10,000 endpoints. This index holds only live
-- dispatch jobs, at most one per endpoint (River's unique job), so each
-- probe reads one entry. Its predicate is the sweeper's own (store.sweep.go).
CREATE INDEX sluice_river_job_live_dispatch_idx ON river_job ((args ->> 'endpoint_id'))
    WHERE kind = 'dispatch' AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable');

-- +goose Down
DROP INDEX sluice_river_job_live_dispatch_idx;
