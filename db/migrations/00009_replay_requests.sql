-- +goose Up

-- A bulk replay (POST /v1/endpoints/{id}/replay) accepted but not yet
-- turned into deliveries. The request's transaction chooses the
-- deliveries to replay in one statement and stores their ids here, with
-- the River job that replays them; the job then creates the replays a
-- chunk at a time, advancing done in each chunk's transaction, and
-- deletes the row with its last chunk. delivery_ids is one array, not a
-- row per delivery: staging a hundred thousand ids then costs one row
-- (TOASTed) instead of a hundred thousand index entries.
--
-- The deliveries named by delivery_ids count as queued: a bulk or single
-- replay skips them until the row is gone. Deleting the endpoint (or
-- tenant) deletes the row, and a job that finds no row has nothing to do.
CREATE TABLE replay_requests (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    endpoint_id  uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    -- The filter the request was made with, for the record.
    status       text NOT NULL,
    since        timestamptz,
    until        timestamptz,
    delivery_ids uuid[] NOT NULL,
    -- queued is cardinality(delivery_ids), the request's answer; done is
    -- how many of delivery_ids (a prefix) have been replayed.
    queued       integer NOT NULL CHECK (queued > 0),
    done         integer NOT NULL DEFAULT 0 CHECK (done >= 0 AND done <= queued),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replay_requests_endpoint_id_idx ON replay_requests (endpoint_id);
CREATE INDEX replay_requests_tenant_id_idx ON replay_requests (tenant_id);

-- +goose Down
DROP TABLE replay_requests;
