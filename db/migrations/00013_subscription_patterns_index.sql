-- +goose Up

-- Fan-out asks for the subscriptions whose patterns could match a group of
-- events (each type, "*", and each of the type's "prefix.*"), so a tenant's
-- thousands of endpoints on other types are not read for every group.
CREATE INDEX subscriptions_event_types_idx ON subscriptions USING gin (event_types);

-- +goose Down
DROP INDEX subscriptions_event_types_idx;
