package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// updateEndpoint changes an endpoint of tenant through the control layer,
// as its owner, with what follows (its operational events, its nudges).
func (b *bundle) updateEndpoint(tenant sluice.Tenant, id uuid.UUID, in control.EndpointInput) sluice.Endpoint {
	b.t.Helper()
	ctl := control.New(control.Config{Store: b.store, Nudger: b.jobs, AllowPrivateTargets: true})
	owner := control.Caller{Tenant: tenant.ID, Role: sluice.RoleOwner, Actor: sluice.Actor{Type: sluice.ActorAPIKey, ID: "test", Name: "test"}}
	ep, err := ctl.UpdateEndpoint(context.Background(), owner, id, in)
	require.NoError(b.t, err)
	return ep
}

// TestManageEndpointForms drives the endpoint forms over HTTP: create with
// the API's rules, edit keeping what the form does not show, the catalogue
// for a consumer, and the confirmations of delete and rotate.
func TestManageEndpointForms(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.store.UpsertEventType(ctx, b.tenantA.ID, sluice.EventType{Name: "invoice.paid", Description: "paid"})
	require.NoError(t, err)
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}

	// The API's rules, with its messages.
	p := br.post("/endpoints", form("url", "http://127.0.0.1/x", "max_in_flight", "500", "rate_kind", "per_second", "rate", "0"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "Url must use https.", "Max in flight must be a whole number from 1 to 100.",
		"Rate limit.per second must be a whole number from 1 to 10000.", `value="http://127.0.0.1/x"`)
	p = br.post("/endpoints", form("url", "https://a.test/x", "max_in_flight", "5", "event_types", "no.such.type"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "not in the event-type catalogue")

	// Created with a catalogue type and a free-text pattern.
	p = br.post("/endpoints", form("url", "https://a.test/x", "description", "billing", "max_in_flight", "5",
		"rate_kind", "per_minute", "rate", "30", "event_types", "invoice.paid", "patterns", "order.* user.created"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, "billing", ep.Description)
	require.Equal(t, &sluice.RateLimit{PerMinute: 30, Burst: 1}, ep.RateLimit)
	require.Nil(t, ep.Consumer)
	p = br.get(p.Location())
	requireContains(t, p, "Endpoint created.", "<code>invoice.paid</code>", "<code>order.*</code>", "<code>user.created</code>")

	// Edit: headers set through the API survive; the form fills back.
	set := ep.Settings()
	set.Headers = map[string]string{"X-Team": "billing"}
	_, err = b.store.UpdateEndpoint(ctx, b.tenantA.ID, id, set, false)
	require.NoError(t, err)
	p = br.get("/endpoints/" + id.String() + "/edit")
	requireContains(t, p, `value="order.* user.created"`, `value="invoice.paid" checked`)
	p = br.post("/endpoints/"+id.String()+"/edit", form("url", "https://b.test/y", "max_in_flight", "7", "disabled", "1", "event_types", "*"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, "https://b.test/y", ep.URL)
	require.True(t, ep.Disabled)
	require.Nil(t, ep.RateLimit)
	require.Equal(t, map[string]string{"X-Team": "billing"}, ep.Headers)
	subs, err := b.store.ListSubscriptions(ctx, b.tenantA.ID, &id, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, subs.Items, 1)
	require.Equal(t, []string{"*"}, subs.Items[0].EventTypes)

	// Enable, test, reveal, rotate (confirmed), delete (confirmed).
	require.Equal(t, http.StatusSeeOther, br.post("/endpoints/"+id.String()+"/disable", form("disabled", "0")).Status)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.False(t, ep.Disabled)
	p = br.post("/endpoints/"+id.String()+"/test", form())
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.True(t, strings.HasPrefix(p.Location(), "/events/"), p.Location())
	requireContains(t, br.get(p.Location()), sluice.TestEventType, "https://b.test/y")

	secret, err := b.store.EndpointSecret(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	requireContains(t, br.post("/endpoints/"+id.String()+"/secret", form()), secret)
	p = br.post("/endpoints/"+id.String()+"/secret/rotate", form())
	require.Equal(t, http.StatusSeeOther, p.Status, "unconfirmed: to the confirmation page")
	requireContains(t, br.get(p.Location()), "Rotate the signing secret", `name="confirm" value="yes"`)
	after, err := b.store.EndpointSecret(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, secret, after, "nothing rotated before confirming")
	p = br.post("/endpoints/"+id.String()+"/secret/rotate", form("confirm", "yes"))
	require.Equal(t, http.StatusOK, p.Status)
	after, err = b.store.EndpointSecret(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.NotEqual(t, secret, after)
	requireContains(t, p, after, "New secret made")

	p = br.post("/endpoints/"+id.String()+"/delete", form())
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/endpoints/"+id.String()+"/delete", p.Location())
	_, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err, "nothing deleted before confirming")
	p = br.post("/endpoints/"+id.String()+"/delete", form("confirm", "yes"))
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, "/?done=deleted", p.Location())
	_, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// A consumer's endpoint belongs to it, and subscribes from the
	// catalogue only: free-text patterns are not its to send.
	w := b.portalWorld()
	pb := b.browser()
	pb.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	ptoken := pb.csrf("/endpoints/new")
	require.NotContains(t, pb.get("/endpoints/new").Body, `name="patterns"`)
	p = pb.post("/endpoints", url.Values{"csrf_token": {ptoken}, "url": {"https://c1.test/new"}, "max_in_flight": {"3"},
		"event_types": {"invoice.paid"}, "patterns": {"secret.*"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	eps, err := b.store.ListEndpoints(ctx, b.tenantA.ID, new("c1"), sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, eps.Items, 2)
	created := eps.Items[0]
	require.Equal(t, "https://c1.test/new", created.URL)
	subs, err = b.store.ListSubscriptions(ctx, b.tenantA.ID, &created.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"invoice.paid"}, subs.Items[0].EventTypes)
}

// TestManageBrowser: a tenant manages an endpoint in Chromium through its
// forms and confirmation pages, and replays all of an endpoint's dead
// deliveries through the confirmation, which is not offered at 0.
func TestManageBrowser(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/orders", true)
	bctx := chromium(t, 60*time.Second)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	location := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		return strings.TrimPrefix(v, b.srv.URL)
	}
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.ID("api_key"), b.keyA),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		chromedp.WaitVisible(chromedp.ID("new-endpoint")),
	))

	// Create.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("new-endpoint")),
		chromedp.WaitVisible(chromedp.ID("endpoint-form")),
		chromedp.SendKeys(chromedp.ID("url"), "https://hooks.acme.test/new-one"),
		chromedp.SendKeys(chromedp.ID("patterns"), "order.*"),
		chromedp.Click(chromedp.CSS(`#endpoint-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoint-actions")),
	))
	require.Contains(t, text("p.flash"), "Endpoint created.")
	require.Contains(t, text("#subscriptions"), "order.*")
	id := strings.TrimPrefix(strings.Split(location(), "?")[0], "/endpoints/")

	// Edit: disable it.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`a[href="/endpoints/`+id+`/edit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoint-form")),
		chromedp.Click(chromedp.CSS(`input[name="disabled"]`)),
		chromedp.Click(chromedp.CSS(`#endpoint-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoint-actions")),
	))
	require.Contains(t, text("#endpoint"), "Disabled — by hand")

	// Delete, through its confirmation.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`a[href="/endpoints/`+id+`/delete"]`)),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")),
	))
	require.Contains(t, text("#confirm-detail"), "cannot be undone")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	require.Equal(t, "/?done=deleted", location())
	require.NotContains(t, text("#endpoints"), "new-one")

	// Replay all: offered for the one dead delivery, confirmed, then no
	// longer offered while its replay is queued; the list marks it.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/endpoints/"+s.endpoint.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("a.replay-all-link")),
		chromedp.Click(chromedp.CSS("a.replay-all-link")),
		chromedp.WaitVisible(chromedp.CSS("form.confirm")),
	))
	require.Contains(t, text("#replay-count"), "1 new delivery")
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	))
	require.Contains(t, text("p.flash"), "Queued 1 replay.")
	require.NotContains(t, text("main"), "Replay all", "nothing left to replay")
	require.Contains(t, text("table.deliveries"), "replay of "+s.delivery.ID.String())
	require.Contains(t, text("table.deliveries"), "replayed as")

	// With a day of attempts, the charts draw them.
	b.history(s)
	require.NoError(t, chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chart-day-counts"))))
	bars, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#chart-hour-counts g.bar").length`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, bars, 55, "a bar for (nearly) every minute of the hour")
	screenshot(t, bctx, "dashboard-endpoint")

	// At 1366 px the event's fan-out table shows its Replay column without
	// scrolling.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/events/"+s.event.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("table.deliveries")),
	))
	overflow, err := chromedp.Run(bctx, chromedp.Evaluate[int](
		`(() => { const s = document.querySelector("table.deliveries").parentElement; return s.scrollWidth - s.clientWidth })()`))
	require.NoError(t, err)
	require.LessOrEqual(t, overflow, 0, "the fan-out table scrolls sideways at 1366 px")
}

// TestManageAdaptiveRate: the endpoint form sets an adaptive rate limit
// with its floor under the API's rules, fills them back, and the endpoint's
// list and page show the effective rate.
func TestManageAdaptiveRate(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}

	p := br.post("/endpoints", form("url", "https://a.test/x", "max_in_flight", "5", "rate_kind", "per_second", "rate", "10", "adaptive", "1", "min", "20"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "must be more than 0 and at most the rate")
	p = br.post("/endpoints", form("url", "https://a.test/x", "max_in_flight", "5", "rate_kind", "per_second", "rate", "10", "min", "2"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, "min without adaptive")

	p = br.post("/endpoints", form("url", "https://a.test/x", "max_in_flight", "5", "rate_kind", "per_second", "rate", "10", "adaptive", "1", "min", "2.5", "event_types", "*"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, &sluice.RateLimit{PerSecond: 10, Burst: 10, Adaptive: true, Min: 2.5}, ep.RateLimit)

	p = br.get("/endpoints/" + id.String())
	requireContains(t, p, "10/s, burst 10, adaptive (min 2.5/s)", "Effective rate", ">10/s<")
	p = br.get("/")
	requireContains(t, p, "adaptive (min 2.5/s), now 10/s")
	p = br.get("/endpoints/" + id.String() + "/edit")
	requireContains(t, p, `name="adaptive" value="1" checked`, `value="2.5"`)
}

// TestManageBacklogAlert: the endpoint form sets a backlog alert under the
// API's rules, fills it back, clears it when both fields are emptied, and
// the endpoint's page shows it.
func TestManageBacklogAlert(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}, "url": {"https://a.test/x"}, "max_in_flight": {"5"}, "event_types": {"*"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}

	p := br.post("/endpoints", form("backlog_queued", "0"))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "must be a whole number from 1 to")

	p = br.post("/endpoints", form("backlog_queued", "500", "backlog_oldest", "600"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, &sluice.BacklogAlert{Queued: 500, OldestSeconds: 600}, ep.BacklogAlert)
	requireContains(t, br.get("/endpoints/"+id.String()), "at 500 queued or 600 s waited")
	requireContains(t, br.get("/endpoints/"+id.String()+"/edit"), `name="backlog_queued" type="number" min="1" value="500"`)

	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Nil(t, ep.BacklogAlert, "both fields empty: no alert")
}

// TestManageOrdering: the endpoint form makes an endpoint FIFO, fills the
// box back, and unticking it makes the endpoint unordered again; the
// endpoint's page shows its ordering.
func TestManageOrdering(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}, "url": {"https://a.test/x"}, "max_in_flight": {"5"}, "event_types": {"*"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	p := br.post("/endpoints", form("fifo", "1"))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, sluice.OrderingFIFO, ep.Ordering)
	requireContains(t, br.get("/endpoints/"+id.String()), `<dd id="ordering">fifo</dd>`)
	requireContains(t, br.get("/endpoints/"+id.String()+"/edit"), `name="fifo" value="1" checked`)

	p = br.post("/endpoints/"+id.String()+"/edit", form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ep, err = b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, sluice.OrderingNone, ep.Ordering)
}

func TestManagePollEndpoint(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	requireContains(t, br.get("/endpoints/new"), `<select id="delivery" name="delivery">`)

	p := br.post("/endpoints", url.Values{"csrf_token": {token}, "delivery": {"poll"}, "description": {"nightly"},
		"max_in_flight": {"10"}, "event_types": {"*"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	ep, err := b.store.GetEndpoint(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	require.Equal(t, sluice.DeliveryPoll, ep.Delivery)
	require.Empty(t, ep.URL)

	page := br.get("/endpoints/" + id.String())
	requireContains(t, page, `id="poll-state"`, "read up to position 0 of 0", "never read past yet", "0 deliveries not yet read")
	require.NotContains(t, br.get("/endpoints/"+id.String()+"/edit").Body, `name="url"`)

	secret, err := b.store.EndpointSecret(ctx, b.tenantA.ID, id)
	require.NoError(t, err)
	shown := br.post("/endpoints/"+id.String()+"/secret", url.Values{"csrf_token": {token}})
	requireContains(t, shown, `id="poll-url"`, poll.Token(id, secret))
}

// TestLiftThrottleForm: a throttled endpoint's page offers "Lift throttle",
// which ends the window; an endpoint that is not throttled offers none.
func TestLiftThrottleForm(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	s := b.seed(b.tenantA, "https://a.test/x", false)
	br := b.browser()
	br.login(b.keyA)
	path := "/endpoints/" + s.endpoint.ID.String()
	lift := `action="` + path + `/throttle/lift"`
	require.NotContains(t, br.get(path).Body, lift, "not throttled: nothing to lift")

	_, err := b.store.Pool().Exec(ctx, `INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
		VALUES ($1, now() + interval '1 hour', '429 Too Many Requests (2 in a row): backing off 1h', 2)`, s.endpoint.ID)
	require.NoError(t, err)
	p := br.get(path)
	requireContains(t, p, lift, "backing off 1h")
	p = br.post(path+"/throttle/lift", url.Values{"csrf_token": {br.csrf(path)}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, path+"?done=lifted", p.Location())
	p = br.get(p.Location())
	requireContains(t, p, "Throttle lifted")
	require.NotContains(t, p.Body, "backing off 1h")
	require.NotContains(t, p.Body, lift)
}
