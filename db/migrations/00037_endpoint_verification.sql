-- +goose Up

-- An endpoint whose verification option is "challenge" receives nothing
-- but the challenge until it answers one: verified_at is when it last did
-- (null before, and again when its URL changes or a new challenge is
-- asked for); verification_error is why the last challenge failed.
ALTER TABLE endpoints ADD COLUMN verified_at timestamptz,
    ADD COLUMN verification_error text;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN verification_error, DROP COLUMN verified_at;
