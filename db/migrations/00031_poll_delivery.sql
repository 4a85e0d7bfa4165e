-- +goose Up

-- Pull delivery (internal/poll). An endpoint with delivery = 'poll' is read
-- by its consumer instead of pushed to: it has no url (stored as ''), no
-- dispatch job, and its deliveries are made by routing like any other.
-- delivery is fixed at creation, so every process may remember it.
ALTER TABLE endpoints ADD COLUMN delivery text NOT NULL DEFAULT 'push'
    CHECK (delivery IN ('push', 'poll'));

-- A poll endpoint's deliveries get positions from its reader, not its
-- writer: transactions commit out of order, so an order fixed at insert
-- could put a late commit behind a cursor already read past. A read locks
-- the endpoint's poll_cursors row, numbers the pending deliveries it can
-- see that have no position yet (after last_position), and answers a
-- page of positioned ones. A position never changes, so an old cursor
-- answers the same page again. A delivery given a position loses its
-- next_attempt_at: the unpositioned ones are then exactly those of the
-- claim index (deliveries_claim_idx) with a next_attempt_at, which a read
-- finds without stepping over the endpoint's unread backlog.
ALTER TABLE deliveries ADD COLUMN poll_position bigint;

-- A page: an endpoint's positioned deliveries after a cursor.
CREATE INDEX deliveries_poll_idx ON deliveries (endpoint_id, poll_position)
    WHERE poll_position IS NOT NULL;

-- One row per poll endpoint, made with it. last_position is the last
-- position given; read_position the furthest cursor a reader has passed
-- (the deliveries up to it are delivered), read_at when.
CREATE TABLE poll_cursors (
    endpoint_id   uuid PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    last_position bigint NOT NULL DEFAULT 0,
    read_position bigint NOT NULL DEFAULT 0,
    read_at       timestamptz
);

-- +goose Down
DROP TABLE poll_cursors;
DROP INDEX deliveries_poll_idx;
ALTER TABLE deliveries DROP COLUMN poll_position;
ALTER TABLE endpoints DROP COLUMN delivery;
