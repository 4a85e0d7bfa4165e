-- +goose Up

-- replayed_from is ON DELETE SET NULL: without an index, every deleted
-- delivery (retention, endpoint deletion) scanned the whole table for its
-- replays.
CREATE INDEX deliveries_replayed_from_idx ON deliveries (replayed_from) WHERE replayed_from IS NOT NULL;

-- +goose Down
DROP INDEX deliveries_replayed_from_idx;
