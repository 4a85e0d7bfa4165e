-- +goose Up

-- The tenants' API token buckets, shared by every API and dashboard
-- process (internal/apirate, Shared): one row per tenant, refilled lazily
-- from the time since `at` and read and written by one UPDATE under the
-- row's lock. `granted` is the number of tokens the last UPDATE handed
-- out, so RETURNING can tell the caller; `calls` counts the UPDATEs since
-- the row was made (how often the processes ask). The table is UNLOGGED:
-- its writes cost no WAL and no fsync, and after a crash (or on a promoted
-- standby, which never received it) it is empty, which is every bucket
-- full: one extra burst, never a refusal. The free space left on each
-- page lets the constant updates stay HOT.
CREATE UNLOGGED TABLE api_buckets (
    tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    tokens    double precision NOT NULL,
    at        timestamptz NOT NULL,
    granted   bigint NOT NULL DEFAULT 0,
    calls     bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

-- +goose Down
DROP TABLE api_buckets;
