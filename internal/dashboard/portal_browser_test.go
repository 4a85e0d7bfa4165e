package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// wholeSluice is a whole Sluice process (API, dashboard and workers) on its
// own database, served at srv: what `sluice serve` runs.
type wholeSluice struct {
	t      *testing.T
	srv    *httptest.Server
	proc   *app.Process
	tenant sluice.Tenant
	key    string
}

func startSluice(t *testing.T) *wholeSluice {
	t.Helper()
	return startSluiceWith(t, nil)
}

// startSluiceWith is startSluice with more environment (SLUICE_SMTP_URL).
func startSluiceWith(t *testing.T, more map[string]string) *wholeSluice {
	t.Helper()
	t.Parallel()
	var handler atomic.Value // the process needs the server's URL first
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{
		"DATABASE_URL":                 pgtest.NewDatabase(t),
		"SLUICE_ENCRYPTION_KEY":        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"SLUICE_ALLOW_PRIVATE_TARGETS": "true",
		"SLUICE_PUBLIC_URL":            srv.URL,
		"SLUICE_RETRY_SCHEDULE":        "50ms",
		"SLUICE_DELIVERY_TIMEOUT":      "2s",
	}
	maps.Copy(env, more)
	cfg, err := config.Parse(func(k string) string { return env[k] }, true)
	require.NoError(t, err)
	p, err := app.New(context.Background(), cfg, app.Roles{API: true, Worker: true, Dashboard: true},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(p.Close)
	handler.Store(p.Handler)
	key := apikey.New()
	tenant, err := p.Store.CreateTenant(context.Background(), "Acme", "ops@acme.test", apikey.Digest(key))
	require.NoError(t, err)
	return &wholeSluice{t: t, srv: srv, proc: p, tenant: tenant, key: key}
}

// api calls the API as the tenant, requiring status, and decodes the
// answer into out when not nil.
func (s *wholeSluice) api(method, path string, body any, status int, out any) {
	t := s.t
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, status, res.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), string(raw))
	}
}

// chromium starts a headless Chromium for the test, bounded by timeout.
func chromium(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser tests need Chromium at %s (%v)", chromiumPath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1366, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	return bctx
}

// screenshot saves the page as <dir>/<name>.png when SLUICE_SCREENSHOTS
// is a directory, as TestBrowser does (quality 100 makes a PNG) (the README's pictures are made with
// SLUICE_SCREENSHOTS=$PWD/docs).
func screenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SLUICE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// TestPortalBrowser: a tenant makes a consumer and a portal link through
// the API; in Chromium the link signs in and leaves the address bar; the
// consumer sees only its own endpoints, creates one from the form,
// subscribes it from the catalogue, sends a test event and sees it
// delivered to a real receiver by the real workers; a read-only link shows
// no form at all; revoking the portal signs the browser out; another
// consumer's ids answer 404.
func TestPortalBrowser(t *testing.T) {
	s := startSluice(t)
	bctx := chromium(t, 90*time.Second)
	rcv := receiver.New(t)

	s.api("PUT", "/v1/consumers/c1", map[string]any{"name": "Initech"}, http.StatusCreated, nil)
	s.api("PUT", "/v1/consumers/c2", map[string]any{"name": "Globex"}, http.StatusCreated, nil)
	s.api("PUT", "/v1/event-types/invoice.paid", map[string]any{"description": "An invoice was paid."}, http.StatusCreated, nil)
	s.api("PUT", "/v1/event-types/invoice.voided", map[string]any{"description": "An invoice was voided."}, http.StatusCreated, nil)
	var c2ep, ownEp sluice.Endpoint
	s.api("POST", "/v1/endpoints", map[string]any{"url": "https://globex.test/hooks", "consumer": "c2"}, http.StatusCreated, &c2ep)
	s.api("POST", "/v1/endpoints", map[string]any{"url": "https://own.acme.test/hooks"}, http.StatusCreated, &ownEp)
	var link struct{ URL string }
	s.api("POST", "/v1/consumers/c1/portal", map[string]any{}, http.StatusCreated, &link)
	require.True(t, strings.HasPrefix(link.URL, s.srv.URL+"/portal?token="), link.URL)

	location := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		return strings.TrimPrefix(v, s.srv.URL)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	html := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
		require.NoError(t, err)
		return v
	}

	// The link signs in; the token leaves the address bar.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(link.URL), chromedp.WaitVisible(chromedp.ID("new-endpoint"))))
	require.Equal(t, "/", location())
	require.Contains(t, text("#who"), "Acme · Initech")
	page := html()
	require.NotContains(t, page, c2ep.URL)
	require.NotContains(t, page, ownEp.URL)
	require.NotContains(t, page, `href="/api-keys"`)

	// Create an endpoint pointed at the receiver, subscribed from the
	// catalogue.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("new-endpoint")),
		chromedp.WaitVisible(chromedp.ID("endpoint-form")),
	))
	require.NotContains(t, html(), `id="patterns"`, "a consumer subscribes from the catalogue only")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("url"), rcv.URL()),
		chromedp.SendKeys(chromedp.ID("description"), "Initech billing"),
		chromedp.Click(chromedp.CSS(`input[name="event_types"][value="invoice.paid"]`)),
		chromedp.Click(chromedp.CSS(`#endpoint-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoint")),
	))
	require.Contains(t, text("p.flash"), "Endpoint created.")
	require.Contains(t, text("#subscriptions"), "invoice.paid")
	require.NotContains(t, text("#subscriptions"), "invoice.voided")
	eps, err := s.proc.Store.ListEndpoints(context.Background(), s.tenant.ID, new("c1"), sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, eps.Items, 1, "the endpoint belongs to the consumer")
	mine := eps.Items[0]
	require.Equal(t, "/endpoints/"+mine.ID.String()+"?done=created", location())
	screenshot(t, bctx, "portal")

	// Send a test event: the workers deliver it to the receiver, and the
	// event's page shows it delivered.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form[action="/endpoints/`+mine.ID.String()+`/test"] button`)),
		chromedp.WaitVisible(chromedp.CSS("pre.payload")),
	))
	require.True(t, strings.HasPrefix(location(), "/events/"), location())
	require.Eventually(t, func() bool { return rcv.Count() == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		if _, err := chromedp.Run(bctx, chromedp.Reload()); err != nil {
			return false
		}
		return strings.Contains(text("table.deliveries"), "Delivered")
	}, 10*time.Second, 200*time.Millisecond)
	require.Contains(t, string(rcv.Requests()[0].Body), `"type":"`+sluice.TestEventType+`"`)

	// Another consumer's and the tenant's ids answer 404.
	for _, path := range []string{"/endpoints/" + c2ep.ID.String(), "/endpoints/" + ownEp.ID.String(), "/consumers", "/api-keys"} {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("p.error-status"))))
		require.Contains(t, text("p.error-status"), "404", path)
	}

	// Revoking the portal signs this browser out at its next request.
	s.api("POST", "/v1/consumers/c1/portal/revoke", nil, http.StatusNoContent, nil)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(s.srv.URL+"/endpoints/"+mine.ID.String()),
		chromedp.WaitVisible(chromedp.ID("api_key")),
	))
	require.True(t, strings.HasPrefix(location(), "/login"), location())
	// And the old link no longer works.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(link.URL), chromedp.WaitVisible(chromedp.CSS("p.error-status"))))
	require.Contains(t, text("h1"), "Portal link not valid")

	// A read-only link: the same pages, without a single form.
	s.api("POST", "/v1/consumers/c1/portal", map[string]any{"read_only": true}, http.StatusCreated, &link)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(link.URL), chromedp.WaitVisible(chromedp.ID("endpoints"))))
	require.Contains(t, text("header .logout"), "read-only")
	for _, path := range []string{"/", "/endpoints/" + mine.ID.String(), "/events", "/dead"} {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("main"))))
		forms, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.forms.length`))
		require.NoError(t, err)
		require.Zero(t, forms, "%s shows a form", path)
		require.NotContains(t, html(), "<form", path)
	}
}
