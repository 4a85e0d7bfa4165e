package ingest

import (
	"bytes"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// CommitSpan is the name of a commit's span.
const CommitSpan = "commit"

// Attributes of a commit's span.
const (
	AttrTenantID       = attribute.Key("sluice.tenant.id")
	AttrCommitEvents   = attribute.Key("sluice.commit.events")
	AttrCommitRequests = attribute.Key("sluice.commit.requests")
)

// startCommit starts one span for a transaction in the trace of each
// traced request whose events it stores (evs carry their request's
// context, tracing.Carry), as a child of that request's span. A group
// commit is one transaction for many requests: rather than one span in
// the first request's trace that the others would only link to, every
// traced request gets a span of its own, with the same start and end, so
// each request's trace shows its commit whole; the attributes say how
// many events and requests shared it. A group that the batcher splits to
// isolate a rejected event (package batch) is committed again, and its
// requests get a span for each try.
func (i *Ingester) startCommit(ctx context.Context, evs []fanout.TenantEvent, requests int) []trace.Span {
	if i.tracer == nil {
		return nil
	}
	var (
		spans []trace.Span
		start time.Time
		last  []byte
	)
	for _, ev := range evs {
		stored := ev.Event.TraceContext
		if len(stored) == 0 || bytes.Equal(stored, last) { // a batch's events share their request's
			continue
		}
		last = stored
		parent, ok := tracing.Restore(ctx, stored)
		if !ok {
			continue
		}
		// The request's span is this process's own, not a remote caller's.
		parent = trace.ContextWithSpanContext(parent, trace.SpanContextFromContext(parent).WithRemote(false))
		if spans == nil {
			start = time.Now()
		}
		_, span := i.tracer.Start(parent, CommitSpan, trace.WithTimestamp(start),
			trace.WithAttributes(
				AttrTenantID.String(ev.TenantID.String()),
				AttrCommitEvents.Int(len(evs)),
				AttrCommitRequests.Int(requests),
			))
		spans = append(spans, span)
	}
	return spans
}

// endCommit ends the spans of a commit with its error, if any.
func endCommit(spans []trace.Span, err error) {
	if len(spans) == 0 {
		return
	}
	end := time.Now()
	for _, span := range spans {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "commit failed")
		}
		span.End(trace.WithTimestamp(end))
	}
}
