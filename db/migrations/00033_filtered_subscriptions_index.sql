-- +goose Up

-- The tenants among a group of posts whose subscriptions have a filter
-- (InsertRoutedEvents): only their events' payloads are read as jsonb. An
-- index of the filtered subscriptions alone answers for a tenant without
-- any in one probe of an index that holds none of its rows.
CREATE INDEX subscriptions_filtered_idx ON subscriptions (tenant_id) WHERE filter_path IS NOT NULL;

-- +goose Down
DROP INDEX subscriptions_filtered_idx;
