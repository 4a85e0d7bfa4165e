package dispatch

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// AttemptSpan is the name of an attempt's span.
const AttemptSpan = "deliver"

// Attributes of an attempt's span besides OpenTelemetry's HTTP ones.
const (
	AttrEndpointID     = attribute.Key("sluice.endpoint.id")
	AttrDeliveryID     = attribute.Key("sluice.delivery.id")
	AttrEventID        = attribute.Key("sluice.event.id")
	AttrAttempt        = attribute.Key("sluice.delivery.attempt")
	AttrDeliveryStatus = attribute.Key("sluice.delivery.status")
)

// startAttempt starts the span of an attempt to send c, a client span
// child of the trace context its event carries, so that the attempt is in
// the trace of the request that posted the event; the request sent
// carries the span's traceparent (send.Sender.Send). An event that carries
// none (posted while tracing was off, by a request that was not sampled,
// or one of Sluice's operational events) is sent untraced: span is nil.
func (w *Worker) startAttempt(ctx context.Context, target Target, c Claimed) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, nil
	}
	parent, ok := tracing.Restore(ctx, c.TraceContext)
	if !ok {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		AttrEndpointID.String(target.ID.String()),
		AttrDeliveryID.String(c.ID.String()),
		AttrEventID.String(c.EventID.String()),
		AttrAttempt.Int(c.AttemptCount + 1),
		semconv.HTTPRequestMethodPost,
	}
	// The host alone: an endpoint's path and query may hold a token.
	if u, err := url.Parse(target.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddress(u.Hostname()))
		if port, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	return w.tracer.Start(parent, AttemptSpan, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endAttempt ends an attempt's span (nil: untraced) with what came of it.
func endAttempt(span trace.Span, res send.Result, outcome Outcome, cut bool) {
	if span == nil {
		return
	}
	defer span.End()
	if cut {
		span.SetStatus(codes.Error, "cut short: the run stopped before a response arrived")
		return
	}
	span.SetAttributes(AttrDeliveryStatus.String(outcome.Status))
	if res.StatusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
	}
	if !res.Delivered() {
		errType := "connection"
		switch {
		case res.StatusCode != 0:
			errType = strconv.Itoa(res.StatusCode)
		case res.TimedOut():
			errType = "timeout"
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, res.Err)
	}
}
