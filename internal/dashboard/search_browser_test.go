package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// searchRow is a dead delivery the search browser test stores: its
// endpoint, event type, creation time and its attempts' codes, the last
// one the code the status_code filter reads.
type searchRow struct {
	name     string
	endpoint uuid.UUID
	typ      string
	created  time.Time
	codes    []int
}

// storeSearchRows stores each row by SQL: an event of its type (addressed
// to the endpoint's consumer, if it has one) and a dead delivery of it to
// its endpoint, created then, with one attempt per code. It returns the
// rows' names by delivery id and by event id.
func (b *bundle) storeSearchRows(rows []searchRow) (map[uuid.UUID]string, map[uuid.UUID]string) {
	t := b.t
	t.Helper()
	ctx := context.Background()
	pool := b.store.Pool()
	names, events := map[uuid.UUID]string{}, map[uuid.UUID]string{}
	for _, r := range rows {
		var ev, del uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload, created_at, consumer)
			VALUES (sluice_uuidv7(), $1, $2, '{}', $3, (SELECT consumer FROM endpoints WHERE id = $4)) RETURNING id`,
			b.tenantA.ID, r.typ, r.created, r.endpoint).Scan(&ev))
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status,
				attempt_count, failure_count, created_at, updated_at)
			VALUES (sluice_uuidv7(), $1, $2, $3, $4, 'dead', $5, $5, $6, now()) RETURNING id`,
			b.tenantA.ID, ev, r.endpoint, r.typ, len(r.codes), r.created).Scan(&del))
		for i, code := range r.codes {
			_, err := pool.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
				VALUES ($1, $2, $3, 12, $4, $5)`, del, r.created.Add(time.Duration(i)*time.Minute), code, r.endpoint, ev)
			require.NoError(t, err)
		}
		names[del], events[ev] = r.name, r.name
	}
	return names, events
}

// TestSearchFiltersBrowser drives the dead-letter list's search filters in
// headless Chromium, in the dashboard and in a consumer's portal: the time
// range is picked in the page's own datetime-local inputs by typing into
// their fields (no script on the page), the status code range and the
// event type prefix are typed, the consumer chosen in its select, the form
// is submitted with its button, and the listed rows are exactly those that
// match every filter; the portal, which has no consumer filter, lists only
// its consumer's. The form keeps what was chosen. The events page's type
// prefix and time range likewise list every matching event for the
// tenant, and only those addressed to the consumer in its portal.
func TestSearchFiltersBrowser(t *testing.T) {
	b := setup(t)
	bctx := chromium(t, 90*time.Second)
	ctx := context.Background()
	for _, uid := range []string{"c1", "c2"} {
		_, _, err := b.store.UpsertConsumer(ctx, b.tenantA.ID, uid, sluice.ConsumerSettings{Name: "Consumer " + uid})
		require.NoError(t, err)
	}
	endpoint := func(uid, url string) uuid.UUID {
		set := sluice.EndpointSettings{URL: url, MaxInFlight: 10}
		if uid != "" {
			set.Consumer = &uid
		}
		ep, err := b.store.CreateEndpoint(ctx, b.tenantA.ID, set, storetest.Secret)
		require.NoError(t, err)
		return ep.ID
	}
	own, c1, c2 := endpoint("", "https://own.acme.test/hooks"), endpoint("c1", "https://c1.test/hooks"), endpoint("c2", "https://c2.test/hooks")
	at := func(h, m int) time.Time { return time.Date(2030, 1, 1, h, m, 0, 0, time.UTC) }
	names, events := b.storeSearchRows([]searchRow{
		{"a", own, "invoice.paid", at(10, 0), []int{503}},
		{"b", c1, "invoice.failed", at(10, 30), []int{500}},
		{"c", c2, "invoice.paid", at(11, 0), []int{502}},
		{"d", c1, "invoice.paid", at(10, 45), []int{404}},      // a 4xx
		{"e", c1, "order.created", at(11, 15), []int{500}},     // another type
		{"f", c1, "invoice.paid", at(13, 0), []int{500}},       // after the range
		{"g", c1, "invoicing.sent", at(10, 10), []int{500}},    // "invoice." is not its prefix
		{"h", c1, "invoice.paid", at(11, 30), []int{500, 404}}, // its last answer a 4xx
		{"i", c1, "invoice.paid", at(9, 0), []int{500}},        // at since: in the range
		{"j", own, "invoice.paid", at(12, 0), []int{500}},      // at until: not in it
	})

	html := func() string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("html")))
		require.NoError(t, err)
		return v
	}
	shown := func() []string {
		t.Helper()
		return listed(t, page{Status: http.StatusOK, Body: html()}, names)
	}
	query := func() url.Values {
		t.Helper()
		loc, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		u, err := url.Parse(loc)
		require.NoError(t, err)
		return u.Query()
	}
	// pick types a date and time into a datetime-local input field by
	// field (month, day, year, hours, minutes, AM/PM, as Chromium lays it
	// out in en-US), then requires the input to hold it.
	pick := func(id string, tm time.Time) {
		t.Helper()
		ampm := "AM"
		if tm.Hour() >= 12 {
			ampm = "PM"
		}
		keys := tm.Format("01") + tm.Format("02") + tm.Format("2006") + kb.ArrowRight + tm.Format("03") + tm.Format("04") + ampm
		require.NoError(t, chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID(id), keys)))
		v, err := chromedp.Run(bctx, chromedp.Value(chromedp.ID(id)))
		require.NoError(t, err)
		require.Equal(t, tm.Format("2006-01-02T15:04"), v, "the %s input holds the time picked", id)
	}
	search := func(consumer, typ, codes string, since, until time.Time) {
		t.Helper()
		if consumer != "-" { // "-": the page has no consumer filter (the portal)
			require.NoError(t, chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("consumer"), consumer)))
		}
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Clear(chromedp.ID("type")),
			chromedp.SendKeys(chromedp.ID("type"), typ),
			chromedp.Clear(chromedp.ID("status_code")),
			chromedp.SendKeys(chromedp.ID("status_code"), codes),
		))
		pick("since", since)
		pick("until", until)
		// The test marks the page it leaves, to wait for the next one.
		_, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.body.dataset.left = "yes"; true`))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Click(chromedp.CSS(`#delivery-filters button[type="submit"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`body[data-left]`)),
			chromedp.WaitVisible(chromedp.CSS(`#delivery-filters a[href^="/dead"]`)), // "clear": the filters are set
		))
	}

	shownEvents := func() []string {
		t.Helper()
		var out []string
		for _, m := range eventLinkRe.FindAllStringSubmatch(html(), -1) {
			name, ok := events[uuid.MustParse(m[1])]
			require.True(t, ok, "an unexpected event %s is listed", m[1])
			out = append(out, name)
		}
		sort.Strings(out)
		return out
	}
	// searchEvents fills the events page's form: a type and a time range.
	searchEvents := func(typ string, since, until time.Time) {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx, chromedp.Clear(chromedp.ID("type")), chromedp.SendKeys(chromedp.ID("type"), typ)))
		pick("since", since)
		pick("until", until)
		_, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.body.dataset.left = "yes"; true`))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(bctx,
			chromedp.Click(chromedp.CSS(`#event-filters button[type="submit"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`body[data-left]`)),
			chromedp.WaitVisible(chromedp.CSS(`#event-filters a[href="/events"]`)),
		))
	}

	// The dashboard, signed in with the tenant's key.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(b.srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("api_key")),
		chromedp.SendKeys(chromedp.ID("api_key"), b.keyA),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
		chromedp.Navigate(b.srv.URL+"/dead"),
		chromedp.WaitVisible(chromedp.ID("delivery-filters")),
	))
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, shown())
	search("", "invoice.*", "500-599", at(9, 0), at(12, 0))
	require.Equal(t, []string{"a", "b", "c", "i"}, shown(), "every filter holds, each end of the range as documented")
	q := query()
	require.Equal(t, "invoice.*", q.Get("type"))
	require.Equal(t, "500-599", q.Get("status_code"))
	require.Equal(t, "2030-01-01T09:00", q.Get("since"))
	require.Equal(t, "2030-01-01T12:00", q.Get("until"))
	page := html()
	require.Contains(t, page, `value="invoice.*"`, "the form keeps the type")
	require.Contains(t, page, `name="since" type="datetime-local" value="2030-01-01T09:00"`, "and the range")
	screenshot(t, bctx, "search-dashboard")

	search("", "invoice.paid", "400-499", at(10, 0), at(14, 0))
	require.Equal(t, []string{"d", "h"}, shown(), "an exact type, a 4xx range")

	// The consumer filter: a consumer's endpoints' rows, with the others.
	search("c1", "invoice.*", "500-599", at(9, 0), at(12, 0))
	require.Equal(t, []string{"b", "i"}, shown(), "c1's rows that match")
	require.Equal(t, "c1", query().Get("consumer"))
	require.Contains(t, html(), `<option value="c1" selected="">`, "the form keeps the consumer")
	search("c2", "invoice.*", "500-599", at(9, 0), at(12, 0))
	require.Equal(t, []string{"c"}, shown(), "c2's")

	// The events page: a type prefix and a time range.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/events"), chromedp.WaitVisible(chromedp.ID("event-filters"))))
	searchEvents("invoice.*", at(9, 0), at(12, 0))
	require.Equal(t, []string{"a", "b", "c", "d", "h", "i"}, shownEvents())

	// The portal of consumer c1: the same search lists only its rows.
	link := portalLink(t, b.store, dashboardKey, b.srv.URL, b.tenantA.ID, "c1", time.Hour, false)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(link.URL),
		chromedp.WaitVisible(chromedp.ID("endpoints")),
		chromedp.Navigate(b.srv.URL+"/dead"),
		chromedp.WaitVisible(chromedp.ID("delivery-filters")),
	))
	require.Equal(t, []string{"b", "d", "e", "f", "g", "h", "i"}, shown(), "the consumer's dead deliveries only")
	require.NotContains(t, html(), `id="consumer"`, "the portal offers no consumer filter")
	search("-", "invoice.*", "500-599", at(9, 0), at(12, 0))
	require.Equal(t, []string{"b", "i"}, shown(), "the consumer's rows that match")
	require.False(t, strings.Contains(html(), c2.String()), "nothing of another consumer's endpoint")
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/events"), chromedp.WaitVisible(chromedp.ID("event-filters"))))
	searchEvents("invoice.*", at(9, 0), at(12, 0))
	require.Equal(t, []string{"b", "d", "h", "i"}, shownEvents(), "the events addressed to the consumer that match")
	screenshot(t, bctx, "search-portal")
}
