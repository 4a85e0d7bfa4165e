-- +goose Up
-- An endpoint's dead deliveries newest first, for the dead letters of one
-- endpoint or of a consumer's endpoints (ListEndpointsDead): each
-- endpoint's page is read off this index within the time range, where the
-- tenant's time index would be read past every other delivery of the
-- range. Only deliveries that die get an entry, so posting and
-- dispatching pay none.
CREATE INDEX deliveries_endpoint_dead_created_idx ON deliveries (endpoint_id, created_at, id) WHERE status = 'dead';

-- +goose Down
DROP INDEX deliveries_endpoint_dead_created_idx;
