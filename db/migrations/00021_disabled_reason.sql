-- +goose Up

-- Why an endpoint is disabled: by hand (manual), because its receiver
-- answered 410 Gone (gone), or because every attempt failed for
-- SLUICE_DISABLE_AFTER while its circuit stayed open (failing). Null while
-- it is enabled.
ALTER TABLE endpoints ADD COLUMN disabled_reason text
    CHECK (disabled_reason IN ('manual', 'gone', 'failing'));
UPDATE endpoints SET disabled_reason = 'manual' WHERE disabled;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_disabled_has_reason
    CHECK ((disabled_reason IS NOT NULL) = disabled);

-- An alert row is one email to an endpoint's owner: a circuit opening or
-- closing (kind circuit, opened says which), or Sluice disabling the
-- endpoint (kind disabled, reason gone or failing).
ALTER TABLE circuit_alerts
    ADD COLUMN kind text NOT NULL DEFAULT 'circuit' CHECK (kind IN ('circuit', 'disabled')),
    ADD COLUMN reason text;

-- +goose Down
ALTER TABLE circuit_alerts DROP COLUMN reason, DROP COLUMN kind;
ALTER TABLE endpoints DROP CONSTRAINT endpoints_disabled_has_reason;
ALTER TABLE endpoints DROP COLUMN disabled_reason;
