package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// sampled is a caller's traceparent that asks for its trace to be sampled.
var sampled = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}

// benchTracing is tracing on, its spans batched for an exporter that
// drops them: what the SDK costs a request, the export aside.
func benchTracing(b *testing.B) *tracing.Provider {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	return tracing.NewSDK(sdk)
}

// BenchmarkPostEventTraced is BenchmarkPostEvent with tracing on and each
// request sampled: its request and commit spans, and its event's stored
// trace context.
func BenchmarkPostEventTraced(b *testing.B) {
	f := storetest.New(b)
	tp := benchTracing(b)
	in, err := ingest.New(f.Store, ingest.Config{Nudger: dispatchtest.Nudger(f.Store, f.Jobs), Tracing: tp})
	if err != nil {
		b.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(in.Stop)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{Ingest: in, APIRate: testRate, Tracing: tp})
	benchRequests(b, a.Handler(), http.MethodPost, "/v1/events", `{"type":"bench.post","payload":{"n":1}}`, f.KeyA, http.StatusAccepted, sampled)
}

// BenchmarkUnmatchedRouteTraced is BenchmarkUnmatchedRoute with tracing
// on and each request sampled.
func BenchmarkUnmatchedRouteTraced(b *testing.B) {
	f := storetest.New(b)
	a := httpapi.New(controltest.New(f.Store, controltest.Options{Nudger: dispatchtest.Nudger(f.Store, f.Jobs)}), httpapi.Config{APIRate: testRate, Tracing: benchTracing(b)})
	benchRequests(b, a.Handler(), http.MethodGet, "/v1/nothing", "", f.KeyA, http.StatusNotFound, sampled)
}
