-- +goose Up

-- An endpoint's broker destination (the delivery option destination): its
-- type, names and URL without password live in the options document; the
-- whole URL, credentials included, sealed with the store's key in
-- destination_url_enc, set exactly while the option is.
ALTER TABLE endpoints ADD COLUMN destination_url_enc bytea;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN destination_url_enc;
