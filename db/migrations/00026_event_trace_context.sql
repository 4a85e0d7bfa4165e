-- +goose Up

-- The W3C trace context of the request that posted the event, when that
-- request was traced and sampled (internal/tracing, Carry): a JSON object
-- of its headers, {"traceparent": …, "tracestate": …}. Each attempt to
-- deliver the event starts its span as a child of it, so the attempts are
-- in the request's trace. NULL when tracing is off, which costs nothing:
-- a nullable column without a default is added without rewriting a row.
ALTER TABLE events ADD COLUMN trace_context jsonb;

-- +goose Down
ALTER TABLE events DROP COLUMN trace_context;
