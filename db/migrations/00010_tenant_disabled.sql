-- +goose Up

-- An operator can disable a tenant (`sluice tenant disable`): from then its
-- API keys answer 403 tenant-disabled and its dashboard sessions end, until
-- `sluice tenant enable`. NULL means enabled. Delivery of what it already
-- posted goes on.
ALTER TABLE tenants ADD COLUMN disabled_at timestamptz;

-- +goose Down
ALTER TABLE tenants DROP COLUMN disabled_at;
