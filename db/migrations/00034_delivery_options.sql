-- +goose Up

-- An endpoint's delivery options (sluice.DeliveryOptions) as one document:
-- null while every option is the server's default, so an endpoint that
-- uses none carries nothing but the null.
ALTER TABLE endpoints ADD COLUMN options jsonb;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN options;
