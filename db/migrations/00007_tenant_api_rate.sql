-- +goose Up

-- A tenant's own limit on the API's rate, as "<n>/s" or "<n>/m" (the burst
-- is twice the rate per second); NULL means SLUICE_API_RATE. Set by
-- `sluice tenant set-rate`.
ALTER TABLE tenants ADD COLUMN api_rate text
    CHECK (api_rate ~ '^[1-9][0-9]{0,8}/[sm]$');

-- +goose Down
ALTER TABLE tenants DROP COLUMN api_rate;
