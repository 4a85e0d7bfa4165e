-- +goose Up

-- Each slowdown of an adaptive endpoint's effective rate (the rate it was
-- set to, and when), written with the flow state in the record step that
-- made it: between two of them the rate is known (flow.Adaptive.Current),
-- so the dashboard draws the last hour's curve from these rows alone.
-- The insert removes the endpoint's rows older than two hours, so the
-- table holds at most two hours of each endpoint's slowdowns.
CREATE TABLE effective_rate_changes (
    endpoint_id uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL,
    rate        double precision NOT NULL,
    PRIMARY KEY (endpoint_id, at)
);

-- +goose Down
DROP TABLE effective_rate_changes;
