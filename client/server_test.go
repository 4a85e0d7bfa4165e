package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// sluiceServer runs a whole Sluice (API and workers) on a database of its
// own and returns its address and a new tenant's API key.
func sluiceServer(t *testing.T) (url, key string) {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":                 pgtest.NewDatabase(t),
		"SLUICE_ENCRYPTION_KEY":        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"SLUICE_ALLOW_PRIVATE_TARGETS": "true",
		"SLUICE_RETRY_SCHEDULE":        "50ms,50ms",
	}
	cfg, err := config.Parse(func(k string) string { return env[k] }, true)
	require.NoError(t, err)
	p, err := app.New(context.Background(), cfg, app.Roles{API: true, Worker: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(p.Close)
	srv := httptest.NewServer(p.Handler)
	t.Cleanup(srv.Close)
	key = apikey.New()
	_, err = p.Store.CreateTenant(context.Background(), "Acme", "ops@acme.test", apikey.Digest(key))
	require.NoError(t, err)
	return srv.URL, key
}
