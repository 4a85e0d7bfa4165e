-- +goose Up

-- A tenant's team members: people who sign in to the dashboard with an
-- email and a password of their own. An email names one member across all
-- tenants (one sign-in form, no tenant picker), compared case-insensitively.
-- password_hash (argon2id, PHC format) is NULL until the member follows
-- its invitation.
CREATE TABLE members (
    id            uuid PRIMARY KEY,
    tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email         text NOT NULL,
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
    password_hash text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX members_email_key ON members (lower(email));
CREATE INDEX members_tenant_id_idx ON members (tenant_id, id DESC);

-- The one-time links that set a member's password (an invitation, a
-- reset): only the SHA-256 of each token, made by the job that emails it.
CREATE TABLE member_tokens (
    token_hash bytea PRIMARY KEY,
    member_id  uuid NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    purpose    text NOT NULL CHECK (purpose IN ('invite', 'reset')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX member_tokens_member_id_idx ON member_tokens (member_id);

-- A dashboard session is opened with an API key, a portal link or, now, a
-- member's password: exactly one of the three. Removing the member ends
-- its sessions (the cascade).
ALTER TABLE dashboard_sessions
    DROP CONSTRAINT dashboard_sessions_check,
    ADD COLUMN member_id uuid REFERENCES members (id) ON DELETE CASCADE,
    ADD CONSTRAINT dashboard_sessions_one_credential CHECK (num_nonnulls(api_key_id, consumer_id, member_id) = 1);
CREATE INDEX dashboard_sessions_member_id_idx ON dashboard_sessions (member_id)
    WHERE member_id IS NOT NULL;

-- +goose Down
DELETE FROM dashboard_sessions WHERE member_id IS NOT NULL;
DROP INDEX dashboard_sessions_member_id_idx;
ALTER TABLE dashboard_sessions
    DROP CONSTRAINT dashboard_sessions_one_credential,
    DROP COLUMN member_id,
    ADD CONSTRAINT dashboard_sessions_check CHECK ((api_key_id IS NULL) <> (consumer_id IS NULL));
DROP TABLE member_tokens;
DROP TABLE members;
