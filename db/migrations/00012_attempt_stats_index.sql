-- +goose Up

-- The dashboard's charts aggregate one endpoint's attempts over the last
-- hour or day. delivery_attempts only knew its delivery, so that meant
-- joining every delivery the endpoint ever had to find the attempts in the
-- window. The endpoint is now on the attempt itself (a delivery never
-- changes endpoint; RecordOutcomes copies it from the delivery), and this
-- index holds, per endpoint in time order, everything the charts read: the
-- query reads exactly the endpoint's entries in the window, without
-- touching the table when the visibility map allows (index-only scan).
-- No foreign key: the attempt goes when its delivery does (ON DELETE
-- CASCADE), and the delivery when its endpoint does.
ALTER TABLE delivery_attempts ADD COLUMN endpoint_id uuid;
UPDATE delivery_attempts a SET endpoint_id = d.endpoint_id
FROM deliveries d WHERE d.id = a.delivery_id;
ALTER TABLE delivery_attempts ALTER COLUMN endpoint_id SET NOT NULL;
CREATE INDEX delivery_attempts_endpoint_at_idx ON delivery_attempts (endpoint_id, at)
    INCLUDE (status_code, latency_ms);

-- +goose Down
DROP INDEX delivery_attempts_endpoint_at_idx;
ALTER TABLE delivery_attempts DROP COLUMN endpoint_id;
