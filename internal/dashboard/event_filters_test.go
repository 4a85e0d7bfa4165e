package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var eventLinkRe = regexp.MustCompile(`<a href="/events/([0-9a-f-]{36})"><code>`)

// TestEventFilters: the events list filters by type or prefix, creation
// time range (picked with datetime-local inputs, no script) and payload
// filter, and its form keeps what was chosen.
func TestEventFilters(t *testing.T) {
	b := setup(t)
	names := map[string]string{}
	add := func(name, eventType, payload string, created time.Time) {
		ev := b.event(b.tenantA, eventType, payload)
		_, err := b.store.Pool().Exec(context.Background(), `UPDATE events SET created_at = $2 WHERE id = $1`, ev.ID, created)
		require.NoError(t, err)
		names[ev.ID.String()] = name
	}
	add("e1", "invoice.paid", `{"customer": "cus_1"}`, time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC))
	add("e2", "invoice.failed", `{"customer": "cus_2"}`, time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
	add("e3", "order.created", `{"customer": "cus_1"}`, time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC))

	br := b.browser()
	br.login(b.keyA)
	listedEvents := func(query string) []string {
		t.Helper()
		p := br.get("/events" + query)
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		var out []string
		for _, m := range eventLinkRe.FindAllStringSubmatch(p.Body, -1) {
			out = append(out, names[m[1]])
		}
		sort.Strings(out)
		return out
	}
	filter := url.QueryEscape(`{"customer": "cus_1"}`)
	for query, want := range map[string][]string{
		"":                   {"e1", "e2", "e3"},
		"?type=invoice.*":    {"e1", "e2"},
		"?type=invoice.paid": {"e1"},
		"?filter=" + filter:  {"e1", "e3"},
		"?since=2030-01-01T11:00&until=2030-01-02T10:00": {"e2"},
		"?type=invoice.*&filter=" + filter:               {"e1"},
		"?type=&since=&until=&filter=":                   {"e1", "e2", "e3"},
	} {
		require.Equal(t, want, listedEvents(query), query)
	}
	require.Equal(t, http.StatusBadRequest, br.get("/events?since=yesterday").Status)

	p := br.get("/events?type=invoice.*&since=2030-01-01T11:00&filter=" + filter)
	requireContains(t, p, `<form class="filters" id="event-filters" method="get" action="/events">`,
		`name="since" type="datetime-local" value="2030-01-01T11:00"`, `name="until" type="datetime-local" value=""`,
		`name="type" type="text" value="invoice.*"`, `>clear</a>`)
}
