package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// chromiumPath is where the browser test expects Chromium (Debian's
// package; .ci/run installs it).
const chromiumPath = "/usr/bin/chromium"

// TestBrowser drives the dashboard in headless Chromium, as a person would:
// sign in by typing the key, see the endpoints, click through to an
// endpoint, to its dead delivery, press Replay and land on the new delivery.
// It uses only links and forms: the dashboard has no JavaScript.
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test needs Chromium at %s (%v): run `apt-get install -y --no-install-recommends chromium` (CI's .ci/run installs it)", chromiumPath, err)
	}
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/orders", true)
	other := b.seed(b.tenantB, "https://hooks.globex.test/secret", true)

	// The whole browser session is bounded: the browser stops with ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	text := func(sel chromedp.CSS) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(sel))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	location := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		return strings.TrimPrefix(v, b.srv.URL)
	}
	shot := func(name string) { // SLUICE_SCREENSHOTS=dir keeps a picture of each page
		dir := os.Getenv("SLUICE_SCREENSHOTS")
		if dir == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}

	// Not signed in: the dashboard sends us to the sign-in form.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("api_key")),
	))
	require.Equal(t, "/login", location())
	shot("1-login")

	// A wrong key is refused.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("api_key"), "sk_wrong"),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.error`)),
	))
	require.Contains(t, text("p.error"), "not valid")

	// The right key signs in and shows the endpoints.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("api_key"), b.keyA),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
	))
	require.Equal(t, "/", location())
	table := text("#endpoints")
	require.Contains(t, table, s.endpoint.URL)
	require.Contains(t, table, "Active")
	require.Contains(t, table, "5/s, burst 10")
	require.NotContains(t, table, other.endpoint.URL)
	shot("2-endpoints")

	// Click through to the endpoint and its dead delivery.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#endpoints a[href="/endpoints/`+s.endpoint.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoint")),
	))
	require.Equal(t, "/endpoints/"+s.endpoint.ID.String(), location())
	require.Contains(t, text("table.deliveries"), "Dead")
	shot("3-endpoint")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`table.deliveries a[href="/deliveries/`+s.delivery.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.ID("delivery")),
	))
	require.Equal(t, "/deliveries/"+s.delivery.ID.String(), location())
	require.Contains(t, text("#delivery"), "Dead")
	require.Contains(t, text("ol.attempts"), "HTTP 500")
	require.Contains(t, text("ol.attempts pre"), `<script>alert("x")</script> server exploded`)
	shot("4-delivery")

	// Replay: a new delivery of the same event, shown at once.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form[action="/deliveries/`+s.delivery.ID.String()+`/replay"] button`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	replays := requireReplays(t, b, s, 1)
	require.Equal(t, "/deliveries/"+replays[0].ID.String()+"?replayed=1", location())
	require.Contains(t, text("h1"), replays[0].ID.String())
	details := text("#delivery")
	require.Contains(t, details, "Pending")
	require.Contains(t, details, s.delivery.ID.String(), "links the original")
	shot("5-replayed")

	// The dead-letter list marks the dead delivery as replayed, and offers
	// no "Replay all" while its replay is queued.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/dead"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.deliveries")),
	))
	require.Contains(t, text("table.deliveries"), "replayed as "+replays[0].ID.String()+" (pending)")
	require.NotContains(t, text("body"), "Replay all", "nothing to replay: the event's replay is queued")

	// The replay dies too; now "Replay all" is offered, behind a
	// confirmation page that says what it will queue.
	b.kill(s.endpoint.ID, 500, "boom", "again")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/dead"),
		chromedp.WaitVisible(chromedp.CSS("section.replay-all")),
	))
	shot("6-dead")
	require.Contains(t, text("section.replay-all"), "Replay all 1 dead delivery")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`section.replay-all a[href^="/endpoints/`+s.endpoint.ID.String()+`/replay"]`)),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")),
	))
	require.True(t, strings.HasPrefix(location(), "/endpoints/"+s.endpoint.ID.String()+"/replay?"), location())
	require.Contains(t, text("#replay-count"), "1 new delivery")
	requireReplays(t, b, s, 1) // nothing queued before confirming
	shot("7-confirm")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	require.Contains(t, text("p.flash"), "Queued 1 replay.")
	page, err := b.store.ListDeliveries(context.Background(), b.tenantA.ID,
		sluice.DeliveryFilter{EndpointID: &s.endpoint.ID}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 3, "the original, its replay, and one replay of that replay")
	require.Equal(t, replays[0].ID, *page.Items[0].ReplayedFrom, "the newest delivery is the one replayed")

	// The event with its fan-out, then sign out.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/events/"+s.event.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("pre.payload")),
	))
	require.Contains(t, text("pre.payload"), `"total": "9.99"`)
	shot("8-event")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form.logout button`)),
		chromedp.WaitVisible(chromedp.ID("api_key")),
	))
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/endpoints/"+s.endpoint.ID.String()),
		chromedp.WaitVisible(chromedp.ID("api_key")),
	))
	require.True(t, strings.HasPrefix(location(), "/login"), location())
}
