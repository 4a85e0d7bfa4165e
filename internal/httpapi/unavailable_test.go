package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestDatabaseUnavailable checks that requests made while the database
// cannot be reached answer 503 with Retry-After, logged as a warning, not
// 500: when the key must be looked up, and when it is cached and the event
// itself cannot be stored (batched, or alone with an Idempotency-Key).
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	st := storetest.Unreachable(t)
	// A request waits out its bound (dbwait.Retry): a short one.
	api := New(controltest.New(st, controltest.Options{Nudger: dispatchtest.Nudger(st, nil)}), Config{DBTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Ingest: StartIngest(t, st, dispatchtest.Nudger(st, nil))})
	cached := apikey.New()
	// Looked up "in an hour": the entry stays for the whole test.
	api.keys.put(cached, sluice.Credential{Tenant: sluice.Tenant{ID: uuid.New(), Name: "cached"}}, time.Now().Add(time.Hour))
	h := api.Handler()

	cases := []struct{ name, key, idempotencyKey, path string }{
		{"key lookup", apikey.New(), "", "/v1/events"},
		{"batched event", cached, "", "/v1/events"},
		{"event with Idempotency-Key", cached, "k-1", "/v1/events"},
		{"batch", cached, "", "/v1/events/batch"},
	}
	for _, tc := range cases {
		body := `{"type":"order.created","payload":{"id":1}}`
		if tc.path == "/v1/events/batch" {
			body = `{"events":[` + body + `]}`
		}
		req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tc.key)
		req.Header.Set("Content-Type", "application/json")
		if tc.idempotencyKey != "" {
			req.Header.Set("Idempotency-Key", tc.idempotencyKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s: %s", tc.name, got)
		require.Equal(t, "1", res.Header.Get("Retry-After"), tc.name)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), tc.name)
		require.Contains(t, string(got), typeUnavailable, tc.name)
	}
	require.Contains(t, logs.String(), "level=WARN")
	require.NotContains(t, logs.String(), "level=ERROR")
}
