-- +goose Up

-- When each periodic sweep last ran. Every worker process runs the sweeper,
-- so a dead process (or River leader) never stops it, but a sweep claims
-- its turn here first: across any number of workers it runs about once per
-- interval.
CREATE TABLE sweeps (
    name     text PRIMARY KEY,
    swept_at timestamptz NOT NULL
);
INSERT INTO sweeps (name, swept_at) VALUES ('dispatch', '-infinity');

-- +goose Down
DROP TABLE sweeps;
