-- +goose Up

-- Smart delivery: an endpoint's rate limit may be adaptive, with a floor
-- (min, deliveries a second; NULL: the default). Its effective rate is
-- flow state, kept beside the token bucket on the endpoint row that every
-- dispatch step locks, so every worker process paces at the same rate:
-- adaptive_rate as of adaptive_rate_at (the last slowdown, from which it
-- grows back) and adaptive_halved_at (the last halving). NULL: the
-- endpoint has not slowed down and runs at its configured rate.
ALTER TABLE endpoints
    ADD COLUMN rate_limit_adaptive boolean NOT NULL DEFAULT false,
    ADD COLUMN rate_limit_min      double precision CHECK (rate_limit_min > 0),
    ADD COLUMN adaptive_rate       double precision,
    ADD COLUMN adaptive_rate_at    timestamptz,
    ADD COLUMN adaptive_halved_at  timestamptz;

-- +goose Down
ALTER TABLE endpoints
    DROP COLUMN rate_limit_adaptive, DROP COLUMN rate_limit_min,
    DROP COLUMN adaptive_rate, DROP COLUMN adaptive_rate_at, DROP COLUMN adaptive_halved_at;
