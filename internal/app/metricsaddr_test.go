package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// TestMetricsOnTheirOwnListener: with SLUICE_METRICS_ADDR, /metrics is
// served there alone, and neither on the public port nor on the health
// address; an API process's queue gauges go with it.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		roles app.Roles
		probe string // the listener whose /healthz answers: "public" or "probes"
		gauge string // a series only that process's /metrics shows
	}{
		{"api", app.Roles{API: true, Dashboard: true}, "public", "sluice_queue_stats_up"},
		{"worker", app.Roles{Worker: true}, "probes", "go_goroutines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addrs := serveFor(t, map[string]string{
				"SLUICE_ADDR":         "127.0.0.1:0",
				"SLUICE_HEALTH_ADDR":  "127.0.0.1:0",
				"SLUICE_METRICS_ADDR": "127.0.0.1:0",
			}, tc.roles, tc.probe, "metrics")
			status, body := getURL(t, addrs["metrics"]+"/metrics")
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, body, tc.gauge)
			status, _ = getURL(t, addrs["metrics"]+"/healthz")
			require.Equal(t, http.StatusNotFound, status, "the metrics listener serves /metrics alone")

			status, _ = getURL(t, addrs[tc.probe]+"/healthz")
			require.Equal(t, http.StatusOK, status)
			status, _ = getURL(t, addrs[tc.probe]+"/metrics")
			require.Equal(t, http.StatusNotFound, status, "/metrics is not on the %s listener", tc.probe)
		})
	}
}

// serveFor runs app.Serve with the settings until the test ends, and
// returns the URL of each listener it opened, by what it serves
// ("public", "probes", "metrics"), once every one of want is listening.
func serveFor(t *testing.T, env map[string]string, roles app.Roles, want ...string) map[string]string {
	t.Helper()
	settings := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "SLUICE_ENCRYPTION_KEY": testKey, "SLUICE_DRAIN_DELAY": "1ms"}
	for k, v := range env {
		settings[k] = v
	}
	cfg, err := config.Parse(func(k string) string { return settings[k] }, true)
	require.NoError(t, err)
	ready := make(chan listener, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, cfg, roles, slog.New(listeningHandler{ch: ready})) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return within 30 s of its context ending")
		}
	})
	addrs := map[string]string{}
	timeout := time.After(30 * time.Second)
	for !hasAll(addrs, want) {
		select {
		case l := <-ready:
			addrs[l.serves] = l.url
		case err := <-done:
			t.Fatalf("Serve returned before listening: %v", err)
		case <-timeout:
			t.Fatalf("listening on %v, not all of %v after 30 s", addrs, want)
		}
	}
	return addrs
}

func hasAll(m map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// getURL answers a GET of url with its status and body.
func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}

// listener is one "ready: listening" line of Serve: its URL, and what it
// serves, from the logger's attributes.
type listener struct{ serves, url string }

// listeningHandler is a slog.Handler that passes on the listeners Serve
// opens and drops every other record.
type listeningHandler struct {
	ch    chan<- listener
	attrs []slog.Attr
}

func (h listeningHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h listeningHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "ready: listening" {
		return nil
	}
	l := listener{serves: "public"}
	for _, a := range h.attrs {
		if a.Key == "metrics" || a.Key == "probes" {
			l.serves = a.Key
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "url" {
			l.url = a.Value.String()
		}
		return true
	})
	select {
	case h.ch <- l:
	default:
	}
	return nil
}

func (h listeningHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return listeningHandler{ch: h.ch, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h listeningHandler) WithGroup(string) slog.Handler { return h }
