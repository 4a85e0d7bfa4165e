package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/tracing"
)

// traceRequests gives each /v1 request a server span (otelhttp), the child
// of the request's own W3C traceparent when it has one, named after its
// route once chi has matched it ("POST /v1/events", never an id). The
// API is only wrapped when tracing is on: off, a request pays nothing.
// Its metrics are Sluice's own (observeRequests), not otelhttp's.
func traceRequests(p *tracing.Provider) func(http.Handler) http.Handler {
	span := otelhttp.NewMiddleware("sluice.api",
		otelhttp.WithTracerProvider(p.TracerProvider()),
		otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		// Called as the span starts, before chi has routed (the name then
		// is the /v1 mount's), and again by otelhttp after the handler, as
		// nameSpan does.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if route := routePattern(r); route != "" {
				return r.Method + " " + route
			}
			return r.Method
		}),
	)
	return func(next http.Handler) http.Handler { return span(nameSpan(next)) }
}

// nameSpan names the request's span after the route chi matched, and
// sets its http.route.
func nameSpan(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if route := routePattern(r); route != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Method + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route))
		}
	})
}

// routePattern is the route chi matched so far ("/v1/endpoints/{id}"),
// or "".
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		return rc.RoutePattern()
	}
	return ""
}
