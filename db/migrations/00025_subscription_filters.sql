-- +goose Up

-- A subscription may carry a payload filter (internal/filter): filter is
-- its JSON as written, filter_path the jsonpath predicate it compiles to,
-- which routing evaluates in the statement that makes deliveries
-- (jsonb_path_match; InsertRoutedEvents, MatchFilters). The API writes
-- both or neither.
ALTER TABLE subscriptions
    ADD COLUMN filter json,
    ADD COLUMN filter_path jsonpath,
    ADD CONSTRAINT subscriptions_filter_compiled CHECK ((filter IS NULL) = (filter_path IS NULL));

-- +goose Down
ALTER TABLE subscriptions DROP COLUMN filter_path, DROP COLUMN filter;
