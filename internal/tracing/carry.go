package tracing

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is W3C Trace Context (traceparent, tracestate): what the API
// reads from a request, what an event stores, and what an attempt sends.
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Propagator returns the W3C Trace Context propagator Sluice reads and
// writes trace contexts with.
func Propagator() propagation.TextMapPropagator { return propagator }

// Carry returns the trace context of ctx's span as an event stores it
// (the events.trace_context column): a JSON object of its W3C headers,
// {"traceparent": "…", "tracestate": "…"}. It returns nil when ctx holds
// no sampled span, so an event posted while tracing is off, or by a
// request that is not sampled, carries nothing.
func Carry(ctx context.Context) []byte {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	b, err := json.Marshal(carrier)
	if err != nil { // a map of strings always marshals
		return nil
	}
	return b
}

// Restore returns ctx with the span context an event carries (Carry) as
// its remote parent, and whether it carried a valid one; otherwise ctx as
// it is.
func Restore(ctx context.Context, stored []byte) (context.Context, bool) {
	if len(stored) == 0 {
		return ctx, false
	}
	var carrier propagation.MapCarrier
	if err := json.Unmarshal(stored, &carrier); err != nil {
		return ctx, false
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), carrier))
	if !sc.IsValid() {
		return ctx, false
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), true
}

// Inject writes the trace context of ctx's span into h as W3C headers,
// replacing any traceparent and tracestate already there (an endpoint's
// static headers); with no span in ctx it leaves h alone.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	h.Del("Traceparent")
	h.Del("Tracestate")
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}
