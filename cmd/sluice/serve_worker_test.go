package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeWorkerHealth: `serve --worker` with SLUICE_HEALTH_ADDR answers
// /healthz, /readyz and /metrics there (and nothing else), so an
// orchestrator can probe a worker; it stops cleanly with its context.
func TestServeWorkerHealth(t *testing.T) {
	useDatabase(t)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	t.Setenv("SLUICE_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(raw))
	t.Setenv("SLUICE_HEALTH_ADDR", "127.0.0.1:0")

	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--worker"}, io.Discard, logger) }()

	addr := logs.await(t, regexp.MustCompile(`msg="ready: listening" .*url=http://(\S+)`), done, "its health address")
	get := func(path string) (int, string) {
		res, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	status, body := get("/healthz")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"status":"ok"`)
	status, body = get("/readyz")
	require.Equal(t, http.StatusOK, status, body)
	status, body = get("/metrics")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "go_goroutines", "the process's own metrics")
	status, _ = get("/v1/endpoints")
	require.Equal(t, http.StatusNotFound, status, "a worker serves no API")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "serve --worker shuts down cleanly when its context ends")
	case <-time.After(30 * time.Second):
		t.Fatal("serve --worker did not stop within 30s of its context ending")
	}
	_, err := http.Get("http://" + addr + "/healthz")
	require.Error(t, err, "the health address is closed after shutdown")
}

// TestServeWorkerHealthAddressBusy: a health address that cannot be bound
// stops the worker at start instead of leaving it unprobeable.
func TestServeWorkerHealthAddressBusy(t *testing.T) {
	useDatabase(t)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	t.Setenv("SLUICE_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(raw))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() })
	t.Setenv("SLUICE_HEALTH_ADDR", busy.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = run(ctx, []string{"serve", "--worker"}, io.Discard, quiet)
	require.ErrorContains(t, err, "address already in use")
}
