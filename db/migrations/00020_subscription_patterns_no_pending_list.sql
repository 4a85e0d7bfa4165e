-- +goose Up

-- Every post searches subscriptions_event_types_idx to route its events,
-- and subscriptions change only through the API. With GIN's default
-- fastupdate, new entries wait in the index's pending list until a vacuum
-- merges them, and every search reads that whole list, so a tenant that
-- creates thousands of subscriptions at once slows every post until the
-- next vacuum. Without it each subscription goes into the index as it is
-- created.
ALTER INDEX subscriptions_event_types_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('subscriptions_event_types_idx');

-- +goose Down
ALTER INDEX subscriptions_event_types_idx RESET (fastupdate);
