package dashboard_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestBrowserAPIKeys drives the API keys page in headless Chromium: create
// a key (shown once), then revoke it, which takes a confirmation page.
func TestBrowserAPIKeys(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test needs Chromium at %s (%v)", chromiumPath, err)
	}
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	keys := func() []sluice.APIKey {
		t.Helper()
		page, err := b.store.ListAPIKeys(context.Background(), b.tenantA.ID, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		return page.Items
	}

	// Sign in, and open the API keys page from the nav bar.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.ID("api_key"), b.keyA),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`header nav a[href="/api-keys"]`)),
	))
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/api-keys"]`)),
		chromedp.WaitVisible(chromedp.ID("api-keys")),
	))
	require.Contains(t, text("#api-keys"), "(this session)")

	// Create a key: shown once.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("name"), "deploy bot"),
		chromedp.Click(chromedp.CSS(`#create-api-key button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("new-key-value")),
	))
	created := text("#new-key-value")
	require.True(t, strings.HasPrefix(created, "sk_"), created)
	_, err := b.store.AuthenticateAPIKey(context.Background(), apikey.Hash(created))
	require.NoError(t, err, "the key shown works")
	require.Len(t, keys(), 2)
	newKey := keys()[0]
	require.Equal(t, "deploy bot", newKey.Name)

	// Revoke asks first: the link leads to a confirmation page, and the
	// key still works there.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#api-key-`+newKey.ID.String()+` a.revoke`)),
		chromedp.WaitVisible(chromedp.ID("confirm-revoke")),
	))
	require.Contains(t, text("h1"), "deploy bot")
	require.Len(t, keys(), 2, "nothing is revoked before confirming")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#confirm-revoke form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	require.Contains(t, text("p.flash"), "revoked")
	require.Len(t, keys(), 1)
	require.NotContains(t, text("#api-keys"), "deploy bot")
	_, err = b.store.AuthenticateAPIKey(context.Background(), apikey.Hash(created))
	require.ErrorIs(t, err, sluice.ErrNotFound)
}
