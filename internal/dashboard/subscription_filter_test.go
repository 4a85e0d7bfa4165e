package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestEndpointFormFilter sets a subscription's payload filter through the
// endpoint form, as a tenant and through a portal link: refused with the
// failing place, tried on the event type's example or a pasted payload
// without saving anything, saved, shown on the endpoint page and filled
// back into the form.
func TestEndpointFormFilter(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.store.UpsertEventType(ctx, b.tenantA.ID, sluice.EventType{
		Name: "order.created", Description: "an order", Example: json.RawMessage(`{"tier": "gold", "total": 120}`)})
	require.NoError(t, err)
	br := b.browser()
	br.login(b.keyA)
	token := br.csrf("/endpoints/new")
	form := func(kv ...string) url.Values {
		v := url.Values{"csrf_token": {token}, "url": {"https://a.test/x"}, "max_in_flight": {"5"}, "event_types": {"order.created"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	endpoints := func() int {
		page, err := b.store.ListEndpoints(ctx, b.tenantA.ID, nil, sluice.PageParams{Limit: 100})
		require.NoError(t, err)
		return len(page.Items)
	}

	p := br.post("/endpoints", form("filter", `{"total": {"$gt": true}}`))
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	requireContains(t, p, "Filter at total.$gt takes a number or a string, not a boolean.")

	// Testing saves nothing, and needs no URL.
	before := endpoints()
	p = br.post("/endpoints", form("url", "", "action", "test-filter", "filter", `{"tier": "gold"}`))
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	requireContains(t, p, `id="filter-tests"`, "<strong>matches</strong>", "the example of order.created: it would be delivered")
	p = br.post("/endpoints", form("action", "test-filter", "filter", `{"total": {"$lt": 100}}`))
	requireContains(t, p, "<strong>no match</strong>", "the example of order.created: it would not be delivered")
	p = br.post("/endpoints", form("action", "test-filter", "filter", `{"tier": "gold"}`, "filter_payload", `{"tier": "silver"}`))
	requireContains(t, p, "<strong>no match</strong>", "the pasted payload: it would not be delivered")
	p = br.post("/endpoints", form("action", "test-filter", "filter", `{"tier": "gold"}`, "filter_payload", `[1]`))
	requireContains(t, p, "the pasted payload: is not a JSON object")
	p = br.post("/endpoints", form("action", "test-filter", "filter", `{"tier": "gold"}`, "event_types", "*"))
	requireContains(t, p, "No example to test on")
	p = br.post("/endpoints", form("action", "test-filter", "filter", `{"tier": {"$regex": "g"}}`))
	requireContains(t, p, "The filter is not valid: tier.$regex: is not an operator")
	require.Equal(t, before, endpoints(), "testing the filter saved nothing")

	// Saved, shown, filled back, and removed by emptying the field.
	p = br.post("/endpoints", form("filter", `{"tier": "gold", "total": {"$gte": 100}}`))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	subs, err := b.store.ListSubscriptions(ctx, b.tenantA.ID, &id, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, subs.Items, 1)
	require.JSONEq(t, `{"tier": "gold", "total": {"$gte": 100}}`, string(subs.Items[0].Filter))
	requireContains(t, br.get("/endpoints/"+id.String()), `id="subscription-filter"`,
		`<code>{&#34;tier&#34;:&#34;gold&#34;,&#34;total&#34;:{&#34;$gte&#34;:100}}</code>`)
	requireContains(t, br.get("/endpoints/"+id.String()+"/edit"), "&#34;tier&#34;: &#34;gold&#34;,\n  &#34;total&#34;: {")
	p = br.post("/endpoints/"+id.String()+"/edit", form("filter", ""))
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	subs, err = b.store.ListSubscriptions(ctx, b.tenantA.ID, &id, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Nil(t, subs.Items[0].Filter)
	requireContains(t, br.get("/endpoints/"+id.String()), "none: every event of its types")

	// The portal's form is the same form.
	_, _, err = b.store.UpsertConsumer(ctx, b.tenantA.ID, "c1", sluice.ConsumerSettings{Name: "One"})
	require.NoError(t, err)
	link := portalLink(t, b.store, dashboardKey, b.srv.URL, b.tenantA.ID, "c1", time.Hour, false)
	pb := b.browser()
	pb.openPortal(link.URL)
	ptoken := pb.csrf("/endpoints/new")
	requireContains(t, pb.get("/endpoints/new"), `<textarea id="filter" name="filter"`)
	pf := url.Values{"csrf_token": {ptoken}, "url": {"https://c1.test/x"}, "max_in_flight": {"5"}, "event_types": {"order.created"},
		"filter": {`{"total": {"$gte": 100}}`}}
	pf.Set("action", "test-filter")
	requireContains(t, pb.post("/endpoints", pf), "<strong>matches</strong>")
	pf.Del("action")
	p = pb.post("/endpoints", pf)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	pid := uuid.MustParse(regexp.MustCompile(`/endpoints/([0-9a-f-]{36})\?done=created`).FindStringSubmatch(p.Location())[1])
	subs, err = b.store.ListSubscriptions(ctx, b.tenantA.ID, &pid, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.JSONEq(t, `{"total": {"$gte": 100}}`, string(subs.Items[0].Filter))
}
