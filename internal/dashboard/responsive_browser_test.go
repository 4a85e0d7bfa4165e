package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// layoutCheck is what fitsJS finds wrong with a page's layout.
type layoutCheck struct {
	ScrollWidth int64    `json:"scrollWidth"`
	InnerWidth  int64    `json:"innerWidth"`
	NavOutside  []string `json:"navOutside"` // nav links not inside the dark bar
	HeaderBG    string   `json:"headerBG"`
	Unboxed     []string `json:"unboxed"`   // tables not in a box of their own that scrolls
	BadBreaks   []string `json:"badBreaks"` // URLs broken elsewhere than after a slash
	WrappedURLs int64    `json:"wrappedURLs"`
	UTCNotes    int64    `json:"utcNotes"` // how often the page says its times are UTC
	// Overflowing are the first elements outside a scrolling box that
	// reach past the window's right edge: what a failure is about.
	Overflowing []string `json:"overflowing"`
}

// fitsJS measures the page in the browser: its scroll width against the
// window's, where the nav bar's links are drawn, whether each table sits
// in a box that scrolls sideways, and where each URL breaks across lines
// (a line ends at a character whose next one is drawn lower).
const fitsJS = `(() => {
  const out = {scrollWidth: document.scrollingElement.scrollWidth, innerWidth: window.innerWidth,
    navOutside: [], unboxed: [], badBreaks: [], wrappedURLs: 0};
  const header = document.querySelector('header.top');
  if (header) {
    const h = header.getBoundingClientRect();
    out.headerBG = getComputedStyle(header).backgroundColor;
    for (const a of header.querySelectorAll('nav a')) {
      const r = a.getBoundingClientRect();
      if (r.left < h.left || r.right > h.right || r.top < h.top || r.bottom > h.bottom) out.navOutside.push(a.textContent);
    }
  }
  for (const t of document.querySelectorAll('main table')) {
    const box = t.parentElement;
    if (!box.classList.contains('scroll') || getComputedStyle(box).overflowX !== 'auto') out.unboxed.push(t.id || t.className || 'table');
  }
  for (const el of document.querySelectorAll('.url')) {
    const chars = [];
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (let i = 0; i < n.data.length; i++) {
        const r = document.createRange();
        r.setStart(n, i); r.setEnd(n, i + 1);
        const rects = r.getClientRects();
        if (rects.length > 0) chars.push({c: n.data[i], top: rects[0].top});
      }
    }
    let wrapped = false;
    for (let i = 1; i < chars.length; i++) {
      if (chars[i].top > chars[i-1].top + 2) {
        wrapped = true;
        if (chars[i-1].c !== '/') out.badBreaks.push(el.textContent + ' breaks before ' + el.textContent.slice(i));
      }
    }
    if (wrapped) out.wrappedURLs++;
  }
  out.overflowing = [...document.body.querySelectorAll('*')]
    .filter(e => !e.closest('.scroll') && e.getBoundingClientRect().right > window.innerWidth + 1)
    .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
  out.utcNotes = (document.body.innerText.match(/times (are )?utc/gi) || []).length;
  return out;
})()`

// TestResponsive opens the main pages in headless Chromium at 390 px (a
// phone) and at 1280 px: nothing is cut off (the page's scroll width is
// the window's), the nav bar's links stay on the dark bar, every table
// scrolls within its own box, URLs break only after a slash, and the page
// says once that its times are UTC. A picture of each page is saved in the
// test's temporary directory (and in SLUICE_SCREENSHOTS, when set).
func TestResponsive(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a := b.tenantA
	const long = "https://hooks.acme-payments-eu-west.example/webhooks/fail/payments/incoming/v2/orders-and-refunds-reconciliation"

	s := b.seed(a, long, true)
	b.history(s)
	twin, err := b.store.CreateEndpoint(ctx, a.ID, sluice.EndpointSettings{URL: long, Description: "refunds, second region",
		MaxInFlight: 5, RateLimit: &sluice.RateLimit{PerSecond: 50, Burst: 50, Adaptive: true}}, storetest.Secret)
	require.NoError(t, err)
	require.NoError(t, b.store.SetSubscriptions(ctx, a.ID, twin.ID, []string{"*"}, nil))
	ev := b.event(a, "invoice.paid", `{"invoice_id":"in_1042","customer":"cus_77","amount":4200,"currency":"EUR"}`)
	b.kill(s.endpoint.ID, 503, "status 503", "<html><body><h1>503 Service Unavailable</h1></body></html>")
	b.kill(twin.ID, 0, "timeout after 10s", "")
	twinDead, err := b.store.ListDeliveries(ctx, a.ID, sluice.DeliveryFilter{EndpointID: &twin.ID}, sluice.PageParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, twinDead.Items, 1)
	for _, email := range []string{"ana.longname-with-hyphens@acme-payments.example", "raj@acme.example"} {
		b.invite(a, email, sluice.RoleAdmin, time.Now())
	}

	bctx := chromium(t, 150*time.Second)
	browserLogin(t, bctx, b.srv.URL, b.keyA)
	dirs := []string{t.TempDir()}
	if d := os.Getenv("SLUICE_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	pages := []struct{ name, path, wait string }{
		{"endpoints", "/", "#endpoints"},
		{"endpoint", "/endpoints/" + s.endpoint.ID.String(), "#charts"},
		{"endpoint-adaptive", "/endpoints/" + twin.ID.String(), "#chart-rate"},
		{"deliveries", "/endpoints/" + s.endpoint.ID.String() + "?status=dead", "table.deliveries"},
		{"delivery", "/deliveries/" + twinDead.Items[0].ID.String(), "#delivery"}, // one attempt: s's has a day of them
		{"events", "/events", "#events"},
		{"event", "/events/" + ev.ID.String(), "table.deliveries"},
		{"dead-letters", "/dead", "section.replay-all"},
		{"audit-log", "/audit", "#audit"},
		{"members", "/members", "#members"},
	}
	for _, width := range []int64{390, 1280} {
		require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(width, 844)))
		wrapped := int64(0)
		for _, pg := range pages {
			name := fmt.Sprintf("%s-%d", pg.name, width)
			require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+pg.path), chromedp.WaitVisible(chromedp.CSS(pg.wait))), name)
			got, err := chromedp.Run(bctx, chromedp.Evaluate[layoutCheck](fitsJS))
			require.NoError(t, err, name)
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			require.NoError(t, err, name)
			for _, d := range dirs {
				require.NoError(t, os.WriteFile(filepath.Join(d, "responsive-"+name+".png"), png, 0o644))
			}

			require.Equal(t, width, got.InnerWidth, name)
			require.LessOrEqual(t, got.ScrollWidth, got.InnerWidth, "%s: something is cut off: %v", name, got.Overflowing)
			require.Empty(t, got.NavOutside, "%s: nav links off the dark bar", name)
			require.Equal(t, "rgb(22, 33, 58)", got.HeaderBG, name)
			require.Empty(t, got.Unboxed, "%s: tables that do not scroll in a box of their own", name)
			require.Empty(t, got.BadBreaks, "%s: URLs broken mid-word", name)
			require.EqualValues(t, 1, got.UTCNotes, "%s: \"Times are UTC\" once", name)
			wrapped += got.WrappedURLs
		}
		if width == 390 {
			require.Positive(t, wrapped, "at 390 px the long URL wraps somewhere: the break check has lines to look at")
		}
	}

	// Two endpoints with the same URL are told apart by their
	// descriptions, wherever they are named.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("section.replay-all"))))
	replayAll := browserText(t, bctx, "section.replay-all")
	require.Contains(t, replayAll, "orders")
	require.Contains(t, replayAll, "refunds, second region")
	dead := browserText(t, bctx, "table.deliveries")
	require.Contains(t, dead, "orders")
	require.Contains(t, dead, "refunds, second region")
	require.Contains(t, dead, long, "the URL reads whole, its <wbr> take no room")

	// The effective-rate chart is drawn as wide as the attempt charts, so
	// its text is the same size.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/endpoints/"+twin.ID.String()), chromedp.WaitVisible(chromedp.CSS("#chart-rate"))))
	widths, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](
		`['#chart-rate-svg', '#chart-hour-counts', '#chart-day-latency'].map(s => document.querySelector(s).getBoundingClientRect().width)`))
	require.NoError(t, err)
	require.Len(t, widths, 3)
	require.Positive(t, widths[0])
	require.InDelta(t, widths[1], widths[0], 0.5, "rate chart %v px wide, attempt charts %v px", widths[0], widths[1])
	require.InDelta(t, widths[2], widths[0], 0.5)
	require.True(t, strings.Contains(browserText(t, bctx, "h1"), "orders-and-refunds-reconciliation"))
}
