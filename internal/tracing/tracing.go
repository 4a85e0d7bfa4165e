// Package tracing is Sluice's OpenTelemetry tracing: the SDK, set up from
// the standard OTEL_* environment when an OTLP endpoint is named; the W3C
// Trace Context propagator, with which the API continues an incoming
// traceparent and an attempt sends its own; and the trace context an
// event carries through the queue, from the request that posted it to
// each attempt to deliver it (Carry, Restore).
//
// Off (no endpoint named, OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none) there is no SDK: a Provider's tracers are
// OpenTelemetry's no-op tracer, and the hot paths (the API's middleware,
// the commit, each attempt) ask Enabled and skip tracing altogether.
//
// Each process owns its Provider; nothing here sets OpenTelemetry's
// globals, so several Sluices in one test binary trace apart.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// ServiceName is the service.name of Sluice's spans unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const ServiceName = "sluice"

// ShutdownTimeout bounds how long Shutdown waits for the last spans to
// be exported.
const ShutdownTimeout = 5 * time.Second

// Config is what Sluice reads of the OTEL_* environment itself, with the
// rest of its configuration (config.Parse): whether to trace and where
// to. The SDK reads the other variables (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS,
// its timeout, compression and certificates, OTEL_BSP_*) from the process
// environment, as the OpenTelemetry specification has it.
type Config struct {
	// URL is where spans are exported (OTLP/HTTP): the
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or else
	// OTEL_EXPORTER_OTLP_ENDPOINT's /v1/traces. Empty: tracing is off.
	URL string
	// BatchTimeout is OTEL_BSP_SCHEDULE_DELAY: the longest a finished span
	// waits to be exported. Zero: the SDK's default (5 s).
	BatchTimeout time.Duration
}

// Enabled reports whether c turns tracing on.
func (c Config) Enabled() bool { return c.URL != "" }

// ConfigFromEnv reads the OTEL_* variables that decide whether and where
// Sluice traces, through getenv. A setting Sluice cannot honour while
// tracing is on (a gRPC protocol, an exporter other than otlp, a URL that
// is not http or https) is an error, so that a process does not start
// believing it exports what goes nowhere.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported: Sluice exports otlp, or none", exporter)
	}
	raw, base := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), false
	if raw == "" {
		raw, base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), true
	}
	if raw == "" {
		return c, nil
	}
	var errs []error
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("OTLP endpoint: %w", err))
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("OTLP endpoint %q: must be an http or https URL", raw))
	case base:
		// The signal's path is added to the base URL's, as the SDK does.
		u.Path = path.Join(u.Path, "/v1/traces")
	case u.Path == "":
		u.Path = "/"
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf", "http/json":
	default:
		errs = append(errs, fmt.Errorf("OTLP protocol %q is not supported: Sluice exports over HTTP (http/protobuf or http/json)", protocol))
	}
	if raw := getenv("OTEL_BSP_SCHEDULE_DELAY"); raw != "" {
		ms, err := strconv.Atoi(raw)
		if err != nil || ms <= 0 {
			errs = append(errs, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY: %q is not a positive number of milliseconds", raw))
		}
		c.BatchTimeout = time.Duration(ms) * time.Millisecond
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	c.URL = u.String()
	return c, nil
}

// Provider is a process's tracer provider: the SDK exporting to the
// configured endpoint, or, with tracing off, OpenTelemetry's no-op
// provider. A nil *Provider is off.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when off
}

// New returns the Provider cfg asks for. With tracing on, spans are
// batched (sdktrace.WithBatcher) and exported over OTLP/HTTP; nothing is
// dialled until the first export.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if !cfg.Enabled() {
		return &Provider{}, nil
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.URL))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override Sluice's own name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(sluice.VersionString())),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if cfg.BatchTimeout > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(cfg.BatchTimeout))
	}
	// No sampler is given: the SDK's own comes from OTEL_TRACES_SAMPLER
	// (default parentbased_always_on).
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, batch...),
		sdktrace.WithResource(res),
	)
	return &Provider{sdk: sdk}, nil
}

// NewSDK returns a Provider on an SDK tracer provider of the caller's:
// for tests, which record spans in memory with one.
func NewSDK(sdk *sdktrace.TracerProvider) *Provider { return &Provider{sdk: sdk} }

// Enabled reports whether p exports spans.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// TracerProvider is p as OpenTelemetry's interface, for instrumentation
// that takes one (otelhttp).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// Tracer returns the tracer of a part of Sluice, named by its package.
func (p *Provider) Tracer(name string) trace.Tracer {
	return p.TracerProvider().Tracer(name, trace.WithInstrumentationVersion(sluice.VersionString()))
}

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx and at most ShutdownTimeout; call it after the API and the
// workers have stopped, so that their last spans are among them.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
