package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// setDelivery sets a delivery's event type, status and creation time.
func (b *bundle) setDelivery(id uuid.UUID, eventType, status string, created time.Time) {
	b.t.Helper()
	_, err := b.store.Pool().Exec(context.Background(),
		`UPDATE deliveries SET event_type = $2, status = $3, created_at = $4,
		        next_attempt_at = CASE WHEN $3 IN ('pending', 'failed') THEN now() END
		 WHERE id = $1`, id, eventType, status, created)
	require.NoError(b.t, err)
}

var deliveryLinkRe = regexp.MustCompile(`<a href="/deliveries/([0-9a-f-]{36})"><code>`)

// listed are the deliveries a list page shows, by name.
func listed(t *testing.T, p page, names map[uuid.UUID]string) []string {
	t.Helper()
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	var out []string
	for _, m := range deliveryLinkRe.FindAllStringSubmatch(p.Body, -1) {
		name, ok := names[uuid.MustParse(m[1])]
		require.True(t, ok, "an unexpected delivery %s is listed", m[1])
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestDeliveryFilters: an endpoint's deliveries and the dead letters filter
// by event type, status and creation time range ([since, until), UTC),
// alone and together, exactly; through a GET form for a session that may
// have forms, and links that keep the other filters for a read-only one.
func TestDeliveryFilters(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/filters", false)
	other := b.seed(b.tenantA, "https://hooks.acme.test/other", false)
	day := func(d, h, m int) time.Time { return time.Date(2030, 1, d, h, m, 0, 0, time.UTC) }
	names := map[uuid.UUID]string{}
	add := func(name, eventType, status string, created time.Time) {
		ev := b.event(b.tenantA, eventType, `{}`)
		_, deliveries, err := b.store.GetEvent(context.Background(), b.tenantA.ID, ev.ID)
		require.NoError(t, err)
		for _, d := range deliveries {
			if d.EndpointID == s.endpoint.ID {
				names[d.ID] = name
				b.setDelivery(d.ID, eventType, status, created)
			} else {
				names[d.ID] = "other-" + name
				b.setDelivery(d.ID, eventType, sluice.DeliveryDelivered, created)
			}
		}
	}
	// The seeded deliveries, without those of each seed's event to the
	// other endpoint: s's is d0, other's x.
	_, err := b.store.Pool().Exec(context.Background(), `DELETE FROM deliveries WHERE id <> ALL($1)`,
		[]uuid.UUID{s.delivery.ID, other.delivery.ID})
	require.NoError(t, err)
	names[s.delivery.ID] = "d0"
	b.setDelivery(s.delivery.ID, "order.created", sluice.DeliveryPending, day(1, 10, 0))
	names[other.delivery.ID] = "x"
	b.setDelivery(other.delivery.ID, "order.created", sluice.DeliveryDead, day(1, 12, 0))
	add("d1", "invoice.paid", sluice.DeliveryDelivered, day(1, 11, 0))
	add("d2", "order.created", sluice.DeliveryDead, day(1, 12, 0))
	add("d3", "order.created", sluice.DeliveryDelivered, day(2, 10, 0))

	br := b.browser()
	br.login(b.keyA)
	ep := "/endpoints/" + s.endpoint.ID.String()
	for query, want := range map[string][]string{
		"":                                     {"d0", "d1", "d2", "d3"},
		"?type=order.created":                  {"d0", "d2", "d3"},
		"?type=invoice.paid":                   {"d1"},
		"?type=order":                          nil, // a type, or a prefix with .*
		"?type=order.*":                        {"d0", "d2", "d3"},
		"?status=delivered":                    {"d1", "d3"},
		"?type=order.created&status=delivered": {"d3"},
		"?since=2030-01-01T10:30&until=2030-01-01T12:00":            {"d1"},             // until is exclusive
		"?since=2030-01-01T11:00":                                   {"d1", "d2", "d3"}, // since is inclusive
		"?until=2030-01-01T11:00:00":                                {"d0"},
		"?since=2030-01-01T11:00:00%2B01:00":                        {"d0", "d1", "d2", "d3"}, // RFC 3339 with an offset: 10:00 UTC
		"?type=order.created&status=dead&since=2030-01-01T11:59":    {"d2"},
		"?type=&status=&since=&until=":                              {"d0", "d1", "d2", "d3"}, // an empty form
		"?type=order.created&status=pending&since=2030-01-02T00:00": nil,
	} {
		require.Equal(t, want, listed(t, br.get(ep+query), names), query)
	}
	require.Equal(t, http.StatusBadRequest, br.get(ep+"?since=yesterday").Status)
	require.Equal(t, http.StatusBadRequest, br.get(ep+"?until=2030-13-01T00:00").Status)

	// The form keeps what was chosen.
	p := br.get(ep + "?type=order.created&status=dead&since=2030-01-01T11:59")
	requireContains(t, p, `<form class="filters" id="delivery-filters" method="get" action="`+ep+`">`,
		`name="type" type="text" list="event-types" value="order.created"`, `<option value="dead" selected>Dead</option>`,
		`name="since" type="datetime-local" value="2030-01-01T11:59"`, `name="until" type="datetime-local" value=""`,
		`>clear</a>`)

	// The dead letters: type and time, and the endpoint, together.
	for query, want := range map[string][]string{
		"":                    {"d2", "x"},
		"?type=order.created": {"d2", "x"},
		"?type=invoice.paid":  nil,
		"?endpoint_id=" + s.endpoint.ID.String() + "&type=order.created": {"d2"},
		"?since=2030-01-01T12:01": nil,
		"?until=2030-01-01T12:01": {"d2", "x"},
	} {
		require.Equal(t, want, listed(t, br.get("/dead"+query), names), query)
	}
	p = br.get("/dead?type=order.created")
	requireContains(t, p, `id="replay-all-filtered"`)
	require.NotContains(t, p.Body, `class="replay-all"`, "Replay all replays more than the filtered list")
	require.Contains(t, br.get("/dead").Body, `class="replay-all"`)

	// A read-only portal session gets links, each keeping the other
	// filters, and no form.
	w := b.portalWorld()
	ro := b.browser()
	ro.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, true))
	c1 := "/endpoints/" + w.c1.endpoint.ID.String()
	p = ro.get(c1 + "?type=notice.sent")
	require.Equal(t, http.StatusOK, p.Status)
	require.NotContains(t, p.Body, "<form")
	requireContains(t, p,
		`<a href="`+c1+`?status=delivered&amp;type=notice.sent" class="">Delivered</a>`,
		`<a href="`+c1+`" class="">any type</a>`,
		`<a href="`+c1+`?type=notice.sent" class="current">notice.sent</a>`)
	require.Regexp(t, `<a href="`+regexp.QuoteMeta(c1)+`\?since=[0-9T%A-]+&amp;type=notice.sent" class="">last hour</a>`, p.Body)
	page, err := b.store.ListDeliveries(context.Background(), b.tenantA.ID,
		sluice.DeliveryFilter{EndpointID: &w.c1.endpoint.ID}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 2, "the consumer's own event and the broadcast")
	c1names := map[uuid.UUID]string{}
	for _, d := range page.Items {
		c1names[d.ID] = d.EventType
	}
	require.Equal(t, []string{"notice.sent"}, listed(t, p, c1names))
	require.Equal(t, []string{"order.created"}, listed(t, ro.get(c1+"?status=dead"), c1names))
	p = ro.get("/dead?" + url.Values{"type": {"order.created"}}.Encode())
	require.NotContains(t, p.Body, "<form")
	require.Equal(t, []string{"order.created"}, listed(t, p, c1names))
	requireContains(t, p, `<a href="/dead?endpoint_id=`+w.c1.endpoint.ID.String()+`&amp;type=order.created" class="">`)
}

// TestLookup: the lookup box takes an event or delivery id and redirects
// to its page; anything else, another tenant's or another consumer's ids
// included, is the 404 page. A read-only session has no box (no forms),
// but /lookup still answers.
func TestLookup(t *testing.T) {
	b := setup(t)
	w := b.portalWorld()
	theirs := b.seed(b.tenantB, "https://hooks.globex.test/x", true)

	br := b.browser()
	br.login(b.keyA)
	requireContains(t, br.get("/"), `<form class="lookup" method="get" action="/lookup" role="search">`)
	lookup := func(br *browser, id string) page {
		t.Helper()
		return br.get("/lookup?" + url.Values{"id": {id}}.Encode())
	}
	requireRedirect := func(br *browser, id, to string) {
		t.Helper()
		p := lookup(br, id)
		require.Equal(t, http.StatusSeeOther, p.Status, id)
		require.Equal(t, to, p.Location())
	}
	requireNotFound := func(br *browser, id string) {
		t.Helper()
		p := lookup(br, id)
		require.Equal(t, http.StatusNotFound, p.Status, id)
		requireContains(t, p, "No event or delivery has this id")
	}

	requireRedirect(br, w.c1.event.ID.String(), "/events/"+w.c1.event.ID.String())
	requireRedirect(br, " "+w.own.delivery.ID.String()+" ", "/deliveries/"+w.own.delivery.ID.String())
	requireRedirect(br, w.c2.delivery.ID.String(), "/deliveries/"+w.c2.delivery.ID.String())
	requireNotFound(br, theirs.event.ID.String())
	requireNotFound(br, theirs.delivery.ID.String())
	requireNotFound(br, uuid.NewString())
	requireNotFound(br, "not-an-id")
	requireNotFound(br, "")

	// A consumer sees its own events and deliveries and the broadcasts,
	// nothing of another consumer's or the tenant's own.
	c1 := b.browser()
	c1.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, false))
	requireRedirect(c1, w.c1.event.ID.String(), "/events/"+w.c1.event.ID.String())
	requireRedirect(c1, w.c1.delivery.ID.String(), "/deliveries/"+w.c1.delivery.ID.String())
	requireRedirect(c1, w.broadcast.ID.String(), "/events/"+w.broadcast.ID.String())
	requireNotFound(c1, w.c2.event.ID.String())
	requireNotFound(c1, w.c2.delivery.ID.String())
	requireNotFound(c1, w.own.event.ID.String())
	requireNotFound(c1, w.own.delivery.ID.String())
	requireNotFound(c1, theirs.delivery.ID.String())

	ro := b.browser()
	ro.openPortal(w.link(t, b.tenantA.ID, "c1", time.Hour, true))
	require.NotContains(t, ro.get("/").Body, "<form")
	requireRedirect(ro, w.c1.delivery.ID.String(), "/deliveries/"+w.c1.delivery.ID.String())
	requireNotFound(ro, w.c2.delivery.ID.String())
}
