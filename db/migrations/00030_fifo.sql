-- +goose Up

-- FIFO endpoints (docs/architecture.md, "FIFO endpoints"): an endpoint
-- with ordering 'fifo' gets each line of its deliveries (its deliveries
-- with one ordering_key, '' for events without one) one at a time, in the
-- order of their fifo_position.
ALTER TABLE endpoints ADD COLUMN ordering text NOT NULL DEFAULT 'none'
    CHECK (ordering IN ('none', 'fifo'));

-- The key an event was posted with, if any (1 to 128 characters).
ALTER TABLE events ADD COLUMN ordering_key text;

-- A delivery to a FIFO endpoint carries its line (ordering_key, never NULL
-- there) and its place in it (fifo_position): its event's id (UUIDv7, the
-- order events were accepted in) for a delivery made by routing, a UUIDv7
-- made at the time of the replay for a replay, so that it goes to the back.
-- A coalesced delivery keeps its place. fifo_sequence is the number its
-- line gave it when it was first claimed (webhook-sequence), kept for
-- every attempt after. All three are NULL on other endpoints' deliveries.
ALTER TABLE deliveries ADD COLUMN ordering_key text,
    ADD COLUMN fifo_position uuid,
    ADD COLUMN fifo_sequence bigint;

-- A FIFO claim reads the head (lowest position) of each of the endpoint's
-- lines from it: a skip scan, one index probe per line (ClaimFIFOHeads).
CREATE INDEX deliveries_fifo_idx ON deliveries (endpoint_id, ordering_key, fifo_position)
    WHERE fifo_position IS NOT NULL AND status IN ('pending', 'failed');

-- Each line's last webhook-sequence given, bumped in the claim that gives
-- the next one.
CREATE TABLE fifo_lines (
    endpoint_id   uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    ordering_key  text NOT NULL,
    last_sequence bigint NOT NULL,
    PRIMARY KEY (endpoint_id, ordering_key)
);

-- Events stored with a fan-out job whose job has not made their
-- deliveries yet: written with the job, deleted in the job's transaction.
-- A FIFO claim takes no head while an event of its tenant accepted before
-- it is here, since that event's delivery, once made, would belong in front.
CREATE TABLE unrouted_events (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    event_id  uuid NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);

-- +goose Down
DROP TABLE unrouted_events;
DROP TABLE fifo_lines;
DROP INDEX deliveries_fifo_idx;
ALTER TABLE deliveries DROP COLUMN fifo_sequence, DROP COLUMN fifo_position, DROP COLUMN ordering_key;
ALTER TABLE events DROP COLUMN ordering_key;
ALTER TABLE endpoints DROP COLUMN ordering;
