-- +goose Up
-- Events and deliveries carry no foreign key to tenants. A tenant is never
-- deleted (it is disabled: sluice tenant disable), and its id comes from
-- its own API key, so the key checked nothing; each check locked the
-- tenant's row FOR KEY SHARE for every event and every delivery inserted,
-- so concurrent posts of one tenant shared that row's lock (a multixact)
-- and each insert paid a trigger and an index read for it. Deliveries keep
-- their key to endpoints, which are deleted, with their deliveries.
ALTER TABLE events DROP CONSTRAINT events_tenant_id_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_tenant_id_fkey;

-- +goose Down
ALTER TABLE deliveries ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
ALTER TABLE events ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
