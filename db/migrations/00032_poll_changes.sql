-- +goose Up

-- A poll reader keeps what it looked up of a poll endpoint between reads
-- (internal/poll) for as long as no notification on sluice_dispatch_wake
-- (internal/dispatch, wakeChannel and pollstamp.go) names the endpoint.
-- These triggers name it at the commit of each change that makes such a
-- look-up wrong, whoever makes it: a new secret (the poll URL's token is
-- a MAC under it), the endpoint's deletion, and its tenant disabled or
-- enabled. Payloads hold at most 200 ids, as the Nudger's do.

-- +goose StatementBegin
CREATE FUNCTION sluice_poll_endpoint_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sluice_dispatch_wake', OLD.id::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER poll_endpoint_changed
    AFTER UPDATE OF secret_enc OR DELETE ON endpoints
    FOR EACH ROW WHEN (OLD.delivery = 'poll')
    EXECUTE FUNCTION sluice_poll_endpoint_changed();

-- +goose StatementBegin
CREATE FUNCTION sluice_poll_tenant_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sluice_dispatch_wake', string_agg(id::text, ','))
    FROM (
        SELECT id, (row_number() OVER () - 1) / 200 AS chunk
        FROM endpoints WHERE tenant_id = NEW.id AND delivery = 'poll'
    ) polls
    GROUP BY chunk;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER poll_tenant_changed
    AFTER UPDATE OF disabled_at ON tenants
    FOR EACH ROW WHEN (OLD.disabled_at IS DISTINCT FROM NEW.disabled_at)
    EXECUTE FUNCTION sluice_poll_tenant_changed();

-- +goose Down
DROP TRIGGER poll_tenant_changed ON tenants;
DROP FUNCTION sluice_poll_tenant_changed();
DROP TRIGGER poll_endpoint_changed ON endpoints;
DROP FUNCTION sluice_poll_endpoint_changed();
