-- +goose Up
-- Routing looks for a tenant's subscriptions holding one of the patterns
-- that could match an event's type (the type, "*", and each "prefix.*":
-- sluice.CandidatePatterns). subscriptions_event_types_idx, a GIN index of
-- every tenant's patterns, answers that across tenants, so the planner
-- reads a tenant's subscriptions by tenant instead when it has few: at a
-- hundred, every post read and matched all hundred. subscription_patterns
-- holds one row per (tenant, pattern, subscription), kept by a trigger on
-- subscriptions, so routing probes the tenant's patterns by key and reads
-- the matching subscriptions only, however many the tenant has and
-- whatever other tenants subscribe to.
--
-- Subscriptions are inserted and deleted, never updated, but the trigger
-- keeps the rows of an update too. The previous release works on this
-- schema (it routes through the GIN index, kept), and its writes keep the
-- table through the trigger while it still runs during an upgrade.
CREATE TABLE subscription_patterns (
    tenant_id       uuid NOT NULL,
    pattern         text NOT NULL,
    subscription_id uuid NOT NULL,
    PRIMARY KEY (tenant_id, pattern, subscription_id)
);

-- +goose StatementBegin
CREATE FUNCTION sluice_subscription_patterns() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM subscription_patterns
        WHERE tenant_id = OLD.tenant_id AND pattern = ANY(OLD.event_types) AND subscription_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO subscription_patterns (tenant_id, pattern, subscription_id)
        SELECT DISTINCT NEW.tenant_id, p.pattern, NEW.id FROM unnest(NEW.event_types) AS p(pattern);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER subscriptions_patterns AFTER INSERT OR DELETE OR UPDATE OF tenant_id, event_types ON subscriptions
    FOR EACH ROW EXECUTE FUNCTION sluice_subscription_patterns();

INSERT INTO subscription_patterns (tenant_id, pattern, subscription_id)
SELECT DISTINCT s.tenant_id, p.pattern, s.id FROM subscriptions s, unnest(s.event_types) AS p(pattern);

-- +goose Down
DROP TRIGGER subscriptions_patterns ON subscriptions;
DROP FUNCTION sluice_subscription_patterns();
DROP TABLE subscription_patterns;
