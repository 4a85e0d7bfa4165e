package tracing_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/testkit/otlpsink"
	"github.com/sluice-dev/sluice/internal/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		vars map[string]string
		url  string // "" means off
		err  string
	}{
		{name: "unset", vars: nil},
		{name: "base endpoint", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			url: "http://collector:4318/v1/traces"},
		{name: "base endpoint with a path", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/otlp/"},
			url: "https://otel.example/otlp/v1/traces"},
		{name: "traces endpoint as it is", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom",
		}, url: "http://collector:4318/custom"},
		{name: "traces endpoint without a path", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318"},
			url: "http://collector:4318/"},
		{name: "sdk disabled", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}},
		{name: "sdk not disabled", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"},
			url: "http://c:4318/v1/traces"},
		{name: "exporter none", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "exporter zipkin", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			err: "OTEL_TRACES_EXPORTER"},
		{name: "grpc", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: "protocol"},
		{name: "grpc for traces", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
		}, err: "protocol"},
		{name: "not a URL", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, err: "http or https"},
		{name: "bad delay", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_BSP_SCHEDULE_DELAY": "5s"},
			err: "OTEL_BSP_SCHEDULE_DELAY"},
		{name: "a bad setting is ignored while off", vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := tracing.ConfigFromEnv(env(tc.vars))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.url, cfg.URL)
			require.Equal(t, tc.url != "", cfg.Enabled())
		})
	}
	cfg, err := tracing.ConfigFromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_BSP_SCHEDULE_DELAY": "250"}))
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, cfg.BatchTimeout)
}

func TestProviderOffIsANoop(t *testing.T) {
	t.Parallel()
	for _, p := range []*tracing.Provider{nil, mustNew(t, tracing.Config{})} {
		require.False(t, p.Enabled())
		_, span := p.Tracer("test").Start(context.Background(), "x")
		require.False(t, span.SpanContext().IsValid(), "a no-op tracer's spans carry nothing")
		require.NoError(t, p.Shutdown(context.Background()))
	}
}

func mustNew(t *testing.T, cfg tracing.Config) *tracing.Provider {
	t.Helper()
	p, err := tracing.New(context.Background(), cfg)
	require.NoError(t, err)
	return p
}

func TestProviderExportsAndShutdownFlushes(t *testing.T) {
	t.Parallel()
	sink := otlpsink.New(t)
	// A batch timeout longer than the test: only Shutdown exports.
	p := mustNew(t, tracing.Config{URL: sink.URL(), BatchTimeout: time.Hour})
	require.True(t, p.Enabled())
	_, span := p.Tracer("test").Start(context.Background(), "work")
	span.End()
	require.NoError(t, p.Shutdown(context.Background()))
	spans := sink.Spans()
	require.Len(t, spans, 1)
	require.Equal(t, "work", spans[0].Name)
	require.Equal(t, tracing.ServiceName, spans[0].Service)
}

func sampledContext(t *testing.T, traceparent, tracestate string) context.Context {
	t.Helper()
	h := http.Header{}
	h.Set("traceparent", traceparent)
	if tracestate != "" {
		h.Set("tracestate", tracestate)
	}
	ctx := tracing.Propagator().Extract(context.Background(), propagation.HeaderCarrier(h))
	require.True(t, trace.SpanContextFromContext(ctx).IsValid())
	return ctx
}

func TestCarryAndRestore(t *testing.T) {
	t.Parallel()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	stored := tracing.Carry(sampledContext(t, parent, "acme=7,other=x"))
	require.JSONEq(t, `{"traceparent": "`+parent+`", "tracestate": "acme=7,other=x"}`, string(stored))

	ctx, ok := tracing.Restore(context.Background(), stored)
	require.True(t, ok)
	sc := trace.SpanContextFromContext(ctx)
	require.True(t, sc.IsRemote())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	require.True(t, sc.IsSampled())
	require.Equal(t, "acme=7,other=x", sc.TraceState().String())

	// Not sampled, or no span: nothing to store.
	require.Nil(t, tracing.Carry(sampledContext(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")))
	require.Nil(t, tracing.Carry(context.Background()))

	for _, bad := range []string{"", "null", "{}", `{"traceparent": "00-zz-yy-01"}`, "not json"} {
		ctx, ok := tracing.Restore(context.Background(), []byte(bad))
		require.False(t, ok, bad)
		require.False(t, trace.SpanContextFromContext(ctx).IsValid(), bad)
	}
}

func TestInjectReplacesStaticHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("traceparent", "static")
	h.Set("tracestate", "static=1")
	tracing.Inject(context.Background(), h)
	require.Equal(t, "static", h.Get("traceparent"), "without a span, headers stay as they are")

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracing.Inject(sampledContext(t, parent, ""), h)
	require.Equal(t, []string{parent}, h.Values("traceparent"))
	require.Empty(t, h.Values("tracestate"), "a static tracestate does not ride along with Sluice's traceparent")
}
