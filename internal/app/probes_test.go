package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
)

func TestProbes(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	ping := func(context.Context) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_probe_test_total", Help: "test"}))
	h := app.NewProbes(ping, 0, reg)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)

	get := func(path string) (int, string, http.Header) {
		res, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body), res.Header
	}
	status, body, _ := get("/healthz")
	require.Equal(t, http.StatusOK, status)
	var ok map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &ok))
	require.Equal(t, "ok", ok["status"])
	require.NotEmpty(t, ok["version"])
	status, _, _ = get("/readyz")
	require.Equal(t, http.StatusOK, status)
	status, body, _ = get("/metrics")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "sluice_probe_test_total 0")
	status, _, _ = get("/v1/endpoints")
	require.Equal(t, http.StatusNotFound, status)

	down.Store(true)
	status, body, hdr := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Contains(t, body, "database unreachable")
	status, _, _ = get("/healthz")
	require.Equal(t, http.StatusOK, status, "alive, if not ready")

	down.Store(false)
	h.Drain()
	status, body, _ = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, body, "shutting down")
}

// TestReadyzBoundsThePing: a database that does not answer at all makes
// /readyz answer 503 once the timeout has passed, not hang.
func TestReadyzBoundsThePing(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	hung := func(ctx context.Context) error {
		<-ctx.Done() // as pgx does: it gives up when the context ends
		return ctx.Err()
	}
	srv := httptest.NewServer(app.NewProbes(hung, timeout, nil).Handler())
	t.Cleanup(srv.Close)
	start := time.Now()
	res, err := srv.Client().Get(srv.URL + "/readyz")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Contains(t, string(body), "database unreachable")
	require.Less(t, time.Since(start), timeout+time.Second)
}
