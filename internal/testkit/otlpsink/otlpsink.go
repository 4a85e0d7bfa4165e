// Package otlpsink is an OTLP/HTTP trace receiver on loopback for tests: it
// accepts POST /v1/traces as an OpenTelemetry collector does (protobuf,
// gzip or not), decodes the spans with the OTLP protobuf types and keeps
// them, so a test can wait for a span and look at its trace.
package otlpsink

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/testkit/watch"
)

// Span is a span received, with the service that sent it.
type Span struct {
	Service string // the resource's service.name
	*tracepb.Span
}

// TraceHex is the span's trace id, as traceparent writes it.
func (s Span) TraceHex() string { return hex.EncodeToString(s.TraceId) }

// SpanHex is the span's id, as traceparent writes it.
func (s Span) SpanHex() string { return hex.EncodeToString(s.SpanId) }

// ParentHex is the span's parent's id; "" for a root span.
func (s Span) ParentHex() string { return hex.EncodeToString(s.ParentSpanId) }

// Attr returns the span's attribute named key, and whether it has one.
func (s Span) Attr(key string) (*commonpb.AnyValue, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Sink is a running OTLP/HTTP trace receiver.
type Sink struct {
	srv *httptest.Server

	spans watch.List[Span]
}

// New starts a sink; it stops when the test ends.
func New(tb interface{ Cleanup(func()) }) *Sink {
	s := &Sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is where to export traces: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
func (s *Sink) URL() string { return s.srv.URL + "/v1/traces" }

// Spans returns every span received so far.
func (s *Sink) Spans() []Span { return s.spans.Items() }

// Await blocks until cond holds for the spans received so far, checking
// again after each export, and reports whether it did before timeout
// passed. cond is called under the sink's lock: it must not keep the list
// or call the sink.
func (s *Sink) Await(timeout time.Duration, cond func(spans []Span) bool) bool {
	return s.spans.Await(timeout, cond)
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, span := range ss.Spans {
				got = append(got, Span{Service: service, Span: span})
			}
		}
	}
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.spans.Add(got...)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
