package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/controltest"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// settle records the last attempt of every due delivery of an endpoint
// with the given outcome, as a dispatcher would.
func (b *bundle) settle(endpointID uuid.UUID, status string, code int, errMsg, body string) {
	b.t.Helper()
	dispatchtest.Settle(b.t, b.store, endpointID, func(c dispatch.Claimed) dispatch.Outcome {
		return dispatch.Outcome{
			DeliveryID: c.ID, EventID: c.EventID, Status: status, Failed: status != sluice.DeliveryDelivered,
			NextAttemptAt: time.Now(), At: time.Now(), StatusCode: code, Error: errMsg, LatencyMS: 87, ResponseBody: body,
		}
	})
}

// TestScreenshots takes the pictures of docs/dashboard.md, and of a few
// more pages (in more/), as a new user meets them: clicked through in
// Chromium at 1280×800 and cut to the window. It runs only when
// SLUICE_SCREENSHOTS names a directory, where it writes its PNGs, so CI
// never rewrites them:
//
//	SLUICE_SCREENSHOTS=$PWD/docs/dashboard bash scripts/withpg.sh go test ./internal/dashboard/ -run TestScreenshots
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("SLUICE_SCREENSHOTS")
	if dir == "" {
		t.Skip("SLUICE_SCREENSHOTS is not set")
	}
	const publicURL = "https://sluice.example.com"
	b := setupWith(t, func(b *bundle) http.Handler {
		return dashboard.New(controltest.New(b.store, controltest.Options{PortalKey: dashboardKey, Nudger: b.nudger, PublicURL: publicURL}), dashboard.Config{Key: dashboardKey, Limits: looseLimits(b.store)}).Handler()
	})
	ctx := context.Background()
	a := b.tenantA

	// A tenant some weeks in: a catalogue, two consumers, endpoints in
	// several states, a day of attempts, and dead letters that failed in
	// different ways.
	for _, et := range []sluice.EventType{
		{Name: "invoice.paid", Description: "An invoice was paid in full.",
			Example: json.RawMessage(`{"invoice_id":"in_1042","customer":"cus_77","amount":4200,"currency":"EUR"}`),
			Schema:  json.RawMessage(`{"type":"object","required":["invoice_id","amount","currency"],"properties":{"invoice_id":{"type":"string"},"amount":{"type":"integer","minimum":0},"currency":{"enum":["EUR","USD","GBP"]}}}`)},
		{Name: "invoice.voided", Description: "An invoice was voided before it was paid.", Deprecated: true},
		{Name: "order.created", Description: "A customer placed an order.", Example: json.RawMessage(`{"order":{"id":42,"total":"9.99"}}`)},
	} {
		_, _, err := b.store.UpsertEventType(ctx, a.ID, et)
		require.NoError(t, err)
	}
	alert := "ops@globex.example"
	_, _, err := b.store.UpsertConsumer(ctx, a.ID, "globex", sluice.ConsumerSettings{Name: "Globex Corporation", AlertEmail: &alert})
	require.NoError(t, err)
	orders := b.seed(a, "https://hooks.acme.example/orders", false)
	b.settle(orders.endpoint.ID, sluice.DeliveryDelivered, 200, "", "ok")
	b.history(orders)
	legacy := b.seed(a, "https://legacy.acme.example/webhooks", false)
	b.settle(legacy.endpoint.ID, sluice.DeliveryDead, 422, "status 422", `{"error":"unknown field \"total\" in order"}`)
	gx := "globex"
	globex, err := b.store.CreateEndpoint(ctx, a.ID, sluice.EndpointSettings{URL: "https://globex.example/hooks/sluice",
		Description: "Globex order sync", MaxInFlight: 4, Consumer: &gx}, storetest.Secret)
	require.NoError(t, err)
	require.NoError(t, b.store.SetSubscriptions(ctx, a.ID, globex.ID, []string{"order.*"}, nil))
	for _, f := range []struct {
		typ, payload string
		code         int
		err, body    string
	}{
		{"invoice.paid", `{"invoice_id":"in_1042","customer":"cus_77","amount":4200,"currency":"EUR"}`, 503, "status 503",
			"<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>"},
		{"order.created", `{"order":{"id":43,"total":"25.00"}}`, 0, "timeout after 10s", ""},
		{"invoice.paid", `{"invoice_id":"in_1043","customer":"cus_12","amount":990,"currency":"EUR"}`, 401, "status 401", `{"error":"signature does not match: check the endpoint's signing secret"}`},
	} {
		b.event(a, f.typ, f.payload)
		b.settle(legacy.endpoint.ID, sluice.DeliveryDead, f.code, f.err, f.body)
		b.settle(orders.endpoint.ID, sluice.DeliveryDelivered, 200, "", "ok")
	}
	set := globex.Settings()
	set.Disabled = true
	_, err = b.store.UpdateEndpoint(ctx, a.ID, globex.ID, set, false)
	require.NoError(t, err)

	bctx := chromium(t, 120*time.Second)
	require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)))
	// shot takes a picture docs/dashboard.md shows; look one of a page
	// worth looking at after a change, kept apart in more/ (ignored by git).
	n := 0
	save := func(dir, name string) {
		t.Helper()
		n++
		// A page shorter than the window is cut to its content.
		h, err := chromedp.Run(bctx, chromedp.Evaluate[int64](`window.scrollY > 0 ? 800 : Math.min(800, Math.ceil(document.body.getBoundingClientRect().bottom))`))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(1280, h)))
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
	shot := func(name string) { t.Helper(); save(dir, name) }
	look := func(name string) { t.Helper(); save(filepath.Join(dir, "more"), name) }
	visit := func(path string, sel string) {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(sel))))
	}
	click := func(sel, wait string) {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(wait))))
	}
	scrollTo := func(sel string) {
		t.Helper()
		_, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(document.querySelector(`+jsString(sel)+`).scrollIntoView({block: "start"}), true)`))
		require.NoError(t, err)
	}

	visit("/login", "#api_key")
	look("login")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("api_key"), b.keyA),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
	))
	shot("endpoints")

	click(`#endpoints a[href="/endpoints/`+orders.endpoint.ID.String()+`"]`, "#endpoint")
	scrollTo("#charts")
	shot("endpoint-charts")

	click(`header nav a[href="/dead"]`, "table.deliveries")
	shot("dead-letters")
	visit("/deliveries/"+legacy.delivery.ID.String(), "#delivery")
	shot("delivery")

	// Consumers: create one, see it, issue a portal link.
	click(`header nav a[href="/consumers"]`, "#consumer-form")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("uid"), "initech"),
		chromedp.SendKeys(chromedp.ID("name"), "Initech"),
		chromedp.SendKeys(chromedp.ID("alert_email"), "webhooks@initech.example"),
	))
	shot("consumers")
	click(`#consumer-form button[type="submit"]`, "#consumer")
	uid := "initech"
	ie, err := b.store.CreateEndpoint(ctx, a.ID, sluice.EndpointSettings{URL: "https://billing.initech.example/webhooks", Description: "Initech billing", MaxInFlight: 10, Consumer: &uid}, storetest.Secret)
	require.NoError(t, err)
	require.NoError(t, b.store.SetSubscriptions(ctx, a.ID, ie.ID, []string{"invoice.paid", "invoice.voided"}, nil))
	require.NoError(t, chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("consumer"))))
	look("consumer")
	click(`a[href="/consumers/initech/edit"]`, "#consumer-form")
	look("consumer-edit")
	visit("/consumers/initech", "#portal-form")
	require.NoError(t, chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("ttl"), "86400")))
	click(`#portal-form button[type="submit"]`, "#portal-link-url")
	shot("consumer-portal-link")
	link := browserText(t, bctx, "#portal-link-url")
	require.True(t, strings.HasPrefix(link, publicURL+"/portal?token="), link)
	click(`a[href="/consumers/initech/portal/revoke"]`, "form.confirm")
	shot("consumer-revoke-portal")
	visit("/consumers/globex/delete", "form.confirm")
	look("consumer-delete")

	// The catalogue: list, an entry, a refused entry, an edit.
	click(`header nav a[href="/event-types"]`, "#event-types")
	shot("event-types")
	click(`#event-types a[href="/event-types/invoice.paid"]`, "#event-type")
	shot("event-type")
	visit("/event-types", "#event-type-form")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("name"), "refund.issued"),
		chromedp.SendKeys(chromedp.ID("description"), "A refund was sent to the customer."),
		chromedp.SetValue(chromedp.ID("example"), `{"refund_id": "re_9", "amount": 990}`),
		chromedp.SetValue(chromedp.ID("schema"), costlySchema()),
	))
	click(`#event-type-form button[type="submit"]`, "#form-error")
	scrollTo("#new-event-type")
	shot("event-type-refused")
	visit("/event-types/invoice.paid/edit", "#event-type-form")
	look("event-type-edit")
	visit("/event-types/sluice.endpoint.disabled", "#operational-note")
	look("event-type-operational")

	// Members: two who have signed in, one invited.
	for _, m := range []struct {
		email  string
		role   sluice.Role
		active bool
	}{{"li@acme.example", sluice.RoleViewer, false}, {"raj@acme.example", sluice.RoleAdmin, true}, {"ana@acme.example", sluice.RoleOwner, true}} {
		_, token := b.invite(a, m.email, m.role, time.Now())
		if m.active {
			_, err := b.store.SetMemberPassword(ctx, member.TokenHash(token), member.HashPassword(goodPassword), time.Now())
			require.NoError(t, err)
		}
	}
	click(`header nav a[href="/members"]`, "#invite-member")
	require.NoError(t, chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("email"), "sam@acme.example")))
	shot("members")

	// The consumer opens its portal link.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+strings.TrimPrefix(link, publicURL)), chromedp.WaitVisible(chromedp.ID("endpoints"))))
	require.Contains(t, browserText(t, bctx, "#who"), "Initech")
	shot("portal")
	t.Logf("%d screenshots in %s", n, dir)
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
