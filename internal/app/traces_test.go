package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sluice-dev/sluice/internal/testkit/otlpsink"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// An incoming traceparent: the caller's trace and span.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// traced starts Sluice exporting its spans to a loopback OTLP receiver,
// flushed every few milliseconds.
func traced(t *testing.T) (*harness, *otlpsink.Sink) {
	t.Helper()
	sink := otlpsink.New(t)
	h := start(t, map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": sink.URL(),
		"OTEL_BSP_SCHEDULE_DELAY":            "20",
	})
	return h, sink
}

// inTrace returns the spans of one trace by name; a name seen twice fails.
func inTrace(t *testing.T, spans []otlpsink.Span, traceID string) map[string]otlpsink.Span {
	t.Helper()
	byName := map[string]otlpsink.Span{}
	for _, s := range spans {
		if s.TraceHex() != traceID {
			continue
		}
		_, twice := byName[s.Name]
		require.False(t, twice, "one %q span in the trace", s.Name)
		byName[s.Name] = s
	}
	return byName
}

// storedTraceparent is the traceparent an event stores, "" for none.
func (h *harness) storedTraceparent(eventID string) string {
	h.t.Helper()
	var stored []byte
	require.NoError(h.t, h.proc.Pool.QueryRow(context.Background(),
		`SELECT trace_context FROM events WHERE id = $1`, eventID).Scan(&stored))
	if stored == nil {
		return ""
	}
	var carrier map[string]string
	require.NoError(h.t, json.Unmarshal(stored, &carrier))
	return carrier["traceparent"]
}

func TestTraceFollowsAnEventFromItsRequestToItsAttempt(t *testing.T) {
	h, sink := traced(t)
	rcv := receiver.New(t)
	epID, _ := h.endpoint(rcv, []string{"order.created"}, nil)

	var ev struct{ ID string }
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]int{"n": 1}},
		http.StatusAccepted, &ev, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01", "tracestate", "acme=7")

	var spans map[string]otlpsink.Span
	require.True(t, sink.Await(15*time.Second, func(all []otlpsink.Span) bool {
		spans = inTrace(t, all, callerTrace)
		return len(spans) == 3
	}), "the request, commit and attempt spans arrive in the caller's trace; got %v", lazy(func() any { return spans }))

	request := spans["POST /v1/events"]
	require.NotNil(t, request.Span, "the request's span is named after its route")
	require.Equal(t, callerSpan, request.ParentHex(), "the request continues the incoming traceparent")
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, request.Kind)
	require.Equal(t, "sluice", request.Service)

	commit := spans["commit"]
	require.NotNil(t, commit.Span)
	require.Equal(t, request.SpanHex(), commit.ParentHex(), "the commit is the request's child")
	events, _ := commit.Attr("sluice.commit.events")
	require.EqualValues(t, 1, events.GetIntValue())

	attempt := spans["deliver"]
	require.NotNil(t, attempt.Span)
	require.Equal(t, request.SpanHex(), attempt.ParentHex(), "the attempt is the child of the request that posted its event")
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, attempt.Kind)
	d := h.deliveries("event_id=" + ev.ID)
	require.Len(t, d, 1)
	for key, want := range map[string]string{
		"sluice.endpoint.id": epID, "sluice.delivery.id": d[0].ID, "sluice.event.id": ev.ID, "sluice.delivery.status": "delivered",
	} {
		got, ok := attempt.Attr(key)
		require.True(t, ok, key)
		require.Equal(t, want, got.GetStringValue(), key)
	}
	n, _ := attempt.Attr("sluice.delivery.attempt")
	require.EqualValues(t, 1, n.GetIntValue())
	status, _ := attempt.Attr("http.response.status_code")
	require.EqualValues(t, 200, status.GetIntValue())

	require.Equal(t, 1, rcv.Count())
	got := rcv.Requests()[0].Header
	require.Equal(t, "00-"+callerTrace+"-"+attempt.SpanHex()+"-01", got.Get("traceparent"),
		"the webhook carries the attempt span's context")
	require.Equal(t, "acme=7", got.Get("tracestate"), "and the caller's tracestate")
	require.Equal(t, "00-"+callerTrace+"-"+request.SpanHex()+"-01", h.storedTraceparent(ev.ID),
		"the event stores the request's span context")
}

func TestTraceOfABatchReachesEachOfItsEventsAttempts(t *testing.T) {
	h, sink := traced(t)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"order.created"}, nil)

	var out struct{ Data []struct{ ID string } }
	h.call(http.MethodPost, "/v1/events/batch", map[string]any{"events": []map[string]any{
		{"type": "order.created", "payload": map[string]int{"n": 1}},
		{"type": "order.created", "payload": map[string]int{"n": 2}},
	}}, http.StatusAccepted, &out, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Len(t, out.Data, 2)

	var request otlpsink.Span
	var attempts []otlpsink.Span
	require.True(t, sink.Await(15*time.Second, func(all []otlpsink.Span) bool {
		attempts = attempts[:0]
		for _, s := range all {
			switch {
			case s.TraceHex() != callerTrace:
			case s.Name == "POST /v1/events/batch":
				request = s
			case s.Name == "deliver":
				attempts = append(attempts, s)
			}
		}
		return request.Span != nil && len(attempts) == 2
	}), "the batch's request span and both attempts arrive in the caller's trace")
	for _, a := range attempts {
		require.Equal(t, request.SpanHex(), a.ParentHex())
	}
	for _, ev := range out.Data {
		require.Equal(t, "00-"+callerTrace+"-"+request.SpanHex()+"-01", h.storedTraceparent(ev.ID),
			"each event of the batch stores the batch request's context")
	}
	require.True(t, rcv.Await(5*time.Second, func(reqs []receiver.Request) bool { return len(reqs) == 2 }))
	for _, req := range rcv.Requests() {
		require.Contains(t, []string{"00-" + callerTrace + "-" + attempts[0].SpanHex() + "-01", "00-" + callerTrace + "-" + attempts[1].SpanHex() + "-01"},
			req.Header.Get("traceparent"))
	}
}

// A request its caller did not sample is not traced further: its event
// stores nothing, and its attempt sends no traceparent.
func TestTraceIsNotStoredForAnUnsampledRequest(t *testing.T) {
	h, sink := traced(t)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"order.created"}, nil)

	var ev struct{ ID string }
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]int{"n": 1}},
		http.StatusAccepted, &ev, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
	require.True(t, rcv.Await(10*time.Second, func(reqs []receiver.Request) bool { return len(reqs) == 1 }), "delivery")
	require.Empty(t, rcv.Requests()[0].Header.Values("traceparent"))
	require.Empty(t, h.storedTraceparent(ev.ID))

	// A sampled request after it: once its attempt's span is exported, any
	// span of the first request's would have been, before it.
	const nextTrace = "0af7651916cd43dd8448eb211c80319c"
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]int{"n": 2}},
		http.StatusAccepted, nil, "traceparent", "00-"+nextTrace+"-"+callerSpan+"-01")
	require.True(t, sink.Await(15*time.Second, func(all []otlpsink.Span) bool {
		_, ok := inTrace(t, all, nextTrace)["deliver"]
		return ok
	}), "the sampled request's attempt span arrives")
	require.Empty(t, inTrace(t, sink.Spans(), callerTrace), "no span of the unsampled trace is exported")
}

// With no OTEL_* variable set, nothing is traced: an incoming traceparent
// is neither stored with the event nor passed on to the receiver.
func TestTracingOffStoresAndSendsNoTraceContext(t *testing.T) {
	h := start(t, nil)
	rcv := receiver.New(t)
	h.endpoint(rcv, []string{"order.created"}, nil)

	var ev struct{ ID string }
	h.call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "payload": map[string]int{"n": 1}},
		http.StatusAccepted, &ev, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	h.postBatch("order.created", 2)
	require.True(t, rcv.Await(10*time.Second, func(reqs []receiver.Request) bool { return len(reqs) == 3 }), "deliveries")
	for _, req := range rcv.Requests() {
		require.Empty(t, req.Header.Values("traceparent"))
		require.Empty(t, req.Header.Values("tracestate"))
	}
	var stored int
	require.NoError(t, h.proc.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM events WHERE trace_context IS NOT NULL`).Scan(&stored))
	require.Zero(t, stored, "no event stores a trace context")
}
