-- +goose Up

-- A group of single posts is stored with its deliveries in one statement
-- (store.InsertRoutedEvents): events, routing and deliveries in one round
-- trip, where a transaction of its own took five. The statement names each
-- delivery itself, and two functions help it.

-- sluice_delivery_id is a delivery's id made from its event's and
-- endpoint's: the event id's first ten bytes (its UUIDv7 millisecond,
-- version, sub-millisecond sequence and variant), so that an endpoint's
-- deliveries sort as their events do, and six bytes of a hash of both ids,
-- so that each endpoint's delivery of the event has an id of its own.
CREATE FUNCTION sluice_delivery_id(event_id uuid, endpoint_id uuid) RETURNS uuid
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (left(replace(event_id::text, '-', ''), 20) || left(md5(event_id::text || endpoint_id::text), 12))::uuid;

-- sluice_within_inline_limit fails the statement, with SQLSTATE SL001, when
-- a group would make more deliveries than its caller makes inline, so that
-- the caller stores the group again with a fan-out job instead
-- (store.MaxInlineDeliveries). It returns true otherwise.
-- +goose StatementBegin
CREATE FUNCTION sluice_within_inline_limit(deliveries bigint, max_deliveries bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF deliveries > max_deliveries THEN
        RAISE EXCEPTION 'the group would make % deliveries, more than % inline', deliveries, max_deliveries
            USING ERRCODE = 'SL001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION sluice_within_inline_limit(bigint, bigint);
DROP FUNCTION sluice_delivery_id(uuid, uuid);
