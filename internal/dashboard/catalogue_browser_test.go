package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// browserText is the text of the element sel of the page in bctx.
func browserText(t *testing.T, bctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return v
}

// browserLogin signs in at base by typing the key, as a person would.
func browserLogin(t *testing.T, bctx context.Context, base, key string) {
	t.Helper()
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.ID("api_key"), key),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		chromedp.WaitVisible(chromedp.ID("who")),
	))
}

// TestConsumerBrowser: in Chromium, a tenant creates a consumer from the
// dashboard, edits it, issues a portal link on its page and opens it: the
// link signs the browser in to that consumer's portal, which shows the
// consumer's endpoint and no tenant page.
func TestConsumerBrowser(t *testing.T) {
	s := startSluice(t)
	bctx := chromium(t, 90*time.Second)
	var own sluice.Endpoint
	s.api("POST", "/v1/endpoints", map[string]any{"url": "https://own.acme.test/hooks"}, 201, &own)
	browserLogin(t, bctx, s.srv.URL, s.key)

	// Create, from the consumers list's form.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/consumers"]`)),
		chromedp.WaitVisible(chromedp.ID("consumer-form")),
		chromedp.SendKeys(chromedp.ID("uid"), "initech"),
		chromedp.SendKeys(chromedp.ID("name"), "Initech"),
		chromedp.SendKeys(chromedp.ID("alert_email"), "ops@initech.test"),
		chromedp.Click(chromedp.CSS(`#consumer-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("consumer")),
	))
	require.Contains(t, browserText(t, bctx, "p.flash"), "Consumer created.")
	require.Contains(t, browserText(t, bctx, "#consumer"), "ops@initech.test")

	// Edit its name.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`a[href="/consumers/initech/edit"]`)),
		chromedp.WaitVisible(chromedp.ID("consumer-form")),
		chromedp.SetValue(chromedp.ID("name"), "Initech Ltd"),
		chromedp.Click(chromedp.CSS(`#consumer-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("consumer")),
	))
	require.Contains(t, browserText(t, bctx, "p.flash"), "Consumer saved.")
	require.Contains(t, browserText(t, bctx, "#consumer"), "Initech Ltd")
	var mine sluice.Endpoint
	s.api("POST", "/v1/endpoints", map[string]any{"url": "https://initech.test/hooks", "consumer": "initech"}, 201, &mine)

	// Issue a portal link: shown once, on the answer.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("ttl"), "86400"),
		chromedp.Click(chromedp.CSS(`#portal-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("portal-link-url")),
	))
	link := browserText(t, bctx, "#portal-link-url")
	require.True(t, strings.HasPrefix(link, s.srv.URL+"/portal?token="), link)
	require.Contains(t, browserText(t, bctx, "#portal-link"), "shown only this once")

	// Open it: the consumer's portal, its endpoint only.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("endpoints"))))
	require.Contains(t, browserText(t, bctx, "#who"), "Acme · Initech Ltd")
	endpoints := browserText(t, bctx, "#endpoints")
	require.Contains(t, endpoints, mine.URL)
	require.NotContains(t, endpoints, own.URL)
	nav := browserText(t, bctx, "header nav")
	require.NotContains(t, nav, "Consumers")
	require.NotContains(t, nav, "Event types")
}

// TestEventTypeBrowser: in Chromium, a tenant creates an event type from
// the catalogue's form: a schema over the evaluation budget comes back on
// the form with the reason (422) and what was typed; fixed, the entry is
// created and shown with its schema indented; then it is edited to be
// deprecated.
func TestEventTypeBrowser(t *testing.T) {
	b := setup(t)
	bctx := chromium(t, 60*time.Second)
	browserLogin(t, bctx, b.srv.URL, b.keyA)

	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/event-types"]`)),
		chromedp.WaitVisible(chromedp.ID("operational-event-types")),
	))
	require.Contains(t, browserText(t, bctx, "#operational-event-types"), "sluice.endpoint.disabled")

	// Over the budget: refused on the form.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("new-event-type-link")),
		chromedp.SendKeys(chromedp.ID("name"), "invoice.paid"),
		chromedp.SendKeys(chromedp.ID("description"), "An invoice was paid."),
		chromedp.SetValue(chromedp.ID("example"), `{"invoice_id": "in_123", "amount": 4200}`),
		chromedp.SetValue(chromedp.ID("schema"), costlySchema()),
		chromedp.Click(chromedp.CSS(`#event-type-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("form-error")),
	))
	require.Contains(t, browserText(t, bctx, "#form-error"), "more than the budget of 1000")
	schema, err := chromedp.Run(bctx, chromedp.Value(chromedp.ID("schema")))
	require.NoError(t, err)
	require.Equal(t, costlySchema(), schema, "what was typed comes back")

	// Fixed: created.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("schema"), `{"type":"object","required":["invoice_id","amount"],"properties":{"amount":{"type":"integer"}}}`),
		chromedp.Click(chromedp.CSS(`#event-type-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("event-type")),
	))
	require.Contains(t, browserText(t, bctx, "p.flash"), "Event type created.")
	require.Contains(t, browserText(t, bctx, "#schema"), "\"required\": [\n    \"invoice_id\",")
	require.Contains(t, browserText(t, bctx, "#example"), "\"amount\": 4200")
	et, err := b.store.GetEventType(context.Background(), b.tenantA.ID, "invoice.paid")
	require.NoError(t, err)
	require.Equal(t, "An invoice was paid.", et.Description)

	// Edit: deprecated.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`a[href="/event-types/invoice.paid/edit"]`)),
		chromedp.WaitVisible(chromedp.ID("event-type-form")),
		chromedp.Click(chromedp.CSS(`input[name="deprecated"]`)),
		chromedp.Click(chromedp.CSS(`#event-type-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("event-type")),
	))
	require.Contains(t, browserText(t, bctx, "p.flash"), "Event type saved.")
	require.Contains(t, browserText(t, bctx, "h1"), "Deprecated")
	et, err = b.store.GetEventType(context.Background(), b.tenantA.ID, "invoice.paid")
	require.NoError(t, err)
	require.True(t, et.Deprecated)
	require.NotNil(t, et.Schema, "the schema stays")
}
