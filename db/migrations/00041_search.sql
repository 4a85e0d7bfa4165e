-- +goose Up

-- Search (GET /v1/deliveries and GET /v1/events with since/until): a
-- tenant's deliveries and events are listed newest first by created_at,
-- then id, and a time range bounds the index scan of each week's partition
-- (a Merge Append of the partitions' indexes, read backwards from the
-- range's end, stops at the page's limit). The (tenant_id, id) indexes
-- served only the lists, whose order they no longer give: each is
-- replaced, not joined, so an insert updates as many indexes as before,
-- each entry 8 bytes (the timestamp) wider. A tenant's deletion still
-- finds its rows by the leading tenant_id.
CREATE INDEX deliveries_tenant_created_idx ON deliveries (tenant_id, created_at, id);
DROP INDEX deliveries_tenant_id_id_idx;
CREATE INDEX events_tenant_created_idx ON events (tenant_id, created_at, id);
DROP INDEX events_tenant_id_id_idx;

-- +goose Down
CREATE INDEX events_tenant_id_id_idx ON events (tenant_id, id);
DROP INDEX events_tenant_created_idx;
CREATE INDEX deliveries_tenant_id_id_idx ON deliveries (tenant_id, id);
DROP INDEX deliveries_tenant_created_idx;
