package ingest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// TestGroupCommitGivesEachTracedRequestACommitSpan: requests sharing one
// transaction each get a commit span in their own trace, and each event
// stores its own request's context; an untraced request gets neither.
func TestGroupCommitGivesEachTracedRequestACommitSpan(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	subscribedEndpoint(t, f, "a", "order.*")
	spans := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	in := start(t, f, ingest.Config{Tracing: tracing.NewSDK(sdk)})

	tr := sdk.Tracer("test")
	ctxA, reqA := tr.Start(context.Background(), "request A")
	ctxB, reqB := tr.Start(context.Background(), "request B")
	evs := []sluice.NewEvent{
		{Type: "order.paid", Payload: []byte(`{}`)}, {Type: "order.paid", Payload: []byte(`{}`)}, {Type: "order.paid", Payload: []byte(`{}`)},
	}
	out, err := in.CommitTogether([]context.Context{ctxA, ctxB, context.Background()}, f.TenantA.ID, evs)
	require.NoError(t, err)
	reqA.End()
	reqB.End()

	commits := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		if s.Name == ingest.CommitSpan {
			commits[s.Parent.SpanID()] = s
		}
	}
	require.Len(t, commits, 2, "one commit span for each traced request")
	for _, req := range []trace.Span{reqA, reqB} {
		commit, ok := commits[req.SpanContext().SpanID()]
		require.True(t, ok, "a commit span is the child of each traced request's span")
		require.Equal(t, req.SpanContext().TraceID(), commit.SpanContext.TraceID())
		attrs := map[string]int64{}
		for _, kv := range commit.Attributes {
			attrs[string(kv.Key)] = kv.Value.AsInt64()
		}
		require.EqualValues(t, 3, attrs[string(ingest.AttrCommitEvents)])
		require.EqualValues(t, 3, attrs[string(ingest.AttrCommitRequests)])
	}
	a, b := commits[reqA.SpanContext().SpanID()], commits[reqB.SpanContext().SpanID()]
	require.Equal(t, a.StartTime, b.StartTime, "both spans time the one transaction")
	require.Equal(t, a.EndTime, b.EndTime)

	for j, want := range []trace.Span{reqA, reqB, nil} {
		var stored []byte
		require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT trace_context FROM events WHERE id = $1`, out[j].ID).Scan(&stored))
		if want == nil {
			require.Nil(t, stored, "an untraced request's event stores no context")
			continue
		}
		var carrier map[string]string
		require.NoError(t, json.Unmarshal(stored, &carrier))
		require.Equal(t, "00-"+want.SpanContext().TraceID().String()+"-"+want.SpanContext().SpanID().String()+"-01", carrier["traceparent"])
	}
}

// TestEveryInsertStoresTheTraceContext: whichever statement stores a
// traced request's events (one routed INSERT, InsertEvents, COPY for a
// large group, InsertEvent for an event with an Idempotency-Key), each
// event stores the request's trace context.
func TestEveryInsertStoresTheTraceContext(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	subscribedEndpoint(t, f, "a", "order.*")
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	in := start(t, f, ingest.Config{Tracing: tracing.NewSDK(sdk)})
	ctx, req := sdk.Tracer("test").Start(context.Background(), "request")
	defer req.End()
	want := "00-" + req.SpanContext().TraceID().String() + "-" + req.SpanContext().SpanID().String() + "-01"

	batch := func(n int, keyed bool) []sluice.NewEvent {
		evs := make([]sluice.NewEvent, n)
		for j := range evs {
			evs[j] = sluice.NewEvent{Type: "order.paid", Payload: []byte(`{}`)}
		}
		if keyed { // a coalesce key takes the group off the one-statement path
			evs[0].CoalesceKey = new("k")
		}
		return evs
	}
	var stored []sluice.Event
	for _, evs := range [][]sluice.NewEvent{batch(2, false), batch(3, true), batch(40, true)} {
		out, err := in.SubmitBatch(ctx, f.TenantA.ID, evs)
		require.NoError(t, err)
		stored = append(stored, out...)
	}
	ev, created, err := in.SubmitIdempotent(ctx, f.TenantA.ID, sluice.NewEvent{Type: "order.paid", Payload: []byte(`{}`), IdempotencyKey: "i1"})
	require.NoError(t, err)
	require.True(t, created)
	stored = append(stored, ev)

	for _, ev := range stored {
		var raw []byte
		require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT trace_context FROM events WHERE id = $1`, ev.ID).Scan(&raw))
		var carrier map[string]string
		require.NoError(t, json.Unmarshal(raw, &carrier), "event %s stores a trace context", ev.ID)
		require.Equal(t, want, carrier["traceparent"])
	}
}
