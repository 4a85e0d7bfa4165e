-- +goose Up

-- An endpoint's OAuth2 client credentials (the delivery option auth): the
-- token URL, client id, scope and audience live in the options document;
-- the client secret, sealed with the store's key, here, in a row that
-- exists exactly while the option does. The row also holds the access
-- token every worker process shares: sealed, with when it expires and
-- when to fetch the next one (a margin before). A process fetching a new
-- token holds the lease refreshing_until, no longer than one attempt's
-- timeout, so that a process that dies while fetching leaves the endpoint
-- to the next one after that, not forever. generation counts the tokens
-- saved and the option's changes: a token fetched under an older
-- generation is not saved over a newer one.
CREATE TABLE endpoint_auth (
    endpoint_id      uuid PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    secret_enc       bytea NOT NULL,
    token_enc        bytea,
    expires_at       timestamptz,
    refresh_at       timestamptz,
    refreshing_until timestamptz,
    generation       bigint NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE endpoint_auth;
