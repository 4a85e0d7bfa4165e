package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// searchRows are what the search tests find: four events an hour apart
// (the newest at t0) with one delivery each to ep, and the newest one
// also to the consumer's endpoint.
type searchRows struct {
	t0         time.Time
	ep, mine   sluice.Endpoint
	portal     control.Caller
	events     []uuid.UUID // oldest first
	deliveries []uuid.UUID // to ep, oldest first
	toConsumer uuid.UUID
}

// seedSearch stores the rows by SQL, each with its own created_at: event i
// (from 0) of type types[i] with payload {"amount": amounts[i]}, its
// delivery answered with codes[i] in turn (the last code is the last
// attempt's).
func seedSearch(t *testing.T, b *testBundle) searchRows {
	t.Helper()
	ctx := context.Background()
	r := searchRows{t0: time.Now().UTC().Truncate(time.Second), ep: b.endpoint(t, b.owner)}
	r.mine, r.portal = b.portalWithEndpoint(t, b.owner, "c1")
	types := []string{"invoice.paid", "invoice.failed", "order.created", "invoice.paid"}
	amounts := []int{10, 500, 20, 30}
	codes := [][]int{{500, 200}, {200, 503}, {404}, nil}
	pool := b.f.Store.Pool()
	for i := range types {
		at := r.t0.Add(time.Duration(i-3) * time.Hour)
		var ev, del uuid.UUID
		err := pool.QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload, created_at)
			VALUES (sluice_uuidv7(), $1, $2, json_build_object('amount', $3::int), $4) RETURNING id`,
			b.owner.Tenant, types[i], amounts[i], at).Scan(&ev)
		require.NoError(t, err)
		insert := `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status, created_at)
			VALUES (sluice_uuidv7(), $1, $2, $3, $4, 'failed', $5) RETURNING id`
		require.NoError(t, pool.QueryRow(ctx, insert, b.owner.Tenant, ev, r.ep.ID, types[i], at).Scan(&del))
		for _, code := range codes[i] {
			_, err := pool.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
				VALUES ($1, $2, $3, 1, $4, $5)`, del, at, code, r.ep.ID, ev)
			require.NoError(t, err)
		}
		r.events, r.deliveries = append(r.events, ev), append(r.deliveries, del)
		if i == len(types)-1 { // a millisecond later: ids made in one millisecond need not sort as made
			require.NoError(t, pool.QueryRow(ctx, insert, b.owner.Tenant, ev, r.mine.ID, types[i], at.Add(time.Millisecond)).Scan(&r.toConsumer))
		}
	}
	return r
}

func TestSearchDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := seedSearch(t, b)
	d := r.deliveries
	find := func(who control.Caller, f sluice.DeliveryFilter) []uuid.UUID {
		t.Helper()
		page, err := b.ctl.Deliveries(ctx, who, f, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		return idsOfDeliveries(page.Items)
	}
	at := func(h time.Duration) *time.Time { return new(r.t0.Add(h)) }

	require.Equal(t, []uuid.UUID{r.toConsumer, d[3], d[2], d[1], d[0]}, find(b.owner, sluice.DeliveryFilter{}), "newest first")
	require.Equal(t, []uuid.UUID{d[2], d[1]}, find(b.owner, sluice.DeliveryFilter{Since: at(-2 * time.Hour), Until: at(-time.Hour + time.Second)}),
		"since is in the range, until is not")
	require.Equal(t, []uuid.UUID{d[1]}, find(b.owner, sluice.DeliveryFilter{StatusCode: new("500-599")}),
		"the last attempt's code: a delivery that failed before it succeeded is not found")
	require.Equal(t, []uuid.UUID{d[0]}, find(b.owner, sluice.DeliveryFilter{StatusCode: new("200")}))
	require.Equal(t, []uuid.UUID{d[2]}, find(b.owner, sluice.DeliveryFilter{StatusCode: new("400-499")}))
	require.Equal(t, []uuid.UUID{r.toConsumer, d[3], d[1], d[0]}, find(b.owner, sluice.DeliveryFilter{EventType: new("invoice.*")}))
	require.Equal(t, []uuid.UUID{r.toConsumer, d[3], d[0]}, find(b.owner, sluice.DeliveryFilter{EventType: new("invoice.paid")}))
	require.Empty(t, find(b.owner, sluice.DeliveryFilter{EventType: new("invoice")}), "an exact type is no prefix")
	require.Equal(t, []uuid.UUID{r.toConsumer}, find(b.owner, sluice.DeliveryFilter{Consumer: new("c1")}))
	require.Equal(t, []uuid.UUID{d[1], d[0]}, find(b.owner, sluice.DeliveryFilter{EventType: new("invoice.*"), Until: at(-time.Hour)}),
		"filters combine")
	require.Equal(t, []uuid.UUID{r.toConsumer}, find(r.portal, sluice.DeliveryFilter{Consumer: new("c2")}),
		"a portal caller's search stays within its consumer")
	require.Empty(t, find(b.other, sluice.DeliveryFilter{}), "another tenant's caller finds none")

	walk := func(f sluice.DeliveryFilter, limit int) []uuid.UUID {
		t.Helper()
		var walked []uuid.UUID
		p := sluice.PageParams{Limit: limit}
		for range 6 {
			page, err := b.ctl.Deliveries(ctx, b.owner, f, p)
			require.NoError(t, err)
			walked = append(walked, idsOfDeliveries(page.Items)...)
			if page.Next == nil {
				break
			}
			p.After = page.Next
		}
		return walked
	}
	require.Equal(t, []uuid.UUID{r.toConsumer, d[3], d[2], d[1], d[0]}, walk(sluice.DeliveryFilter{}, 2), "pages of two walk the list once")
	require.Equal(t, []uuid.UUID{d[2], d[1], d[0]}, walk(sluice.DeliveryFilter{Until: at(-time.Hour + time.Second)}, 1),
		"pages of one walk a range once: below until, each page's cursor bounds the next")

	for _, c := range []struct {
		f     sluice.DeliveryFilter
		field string
	}{
		{sluice.DeliveryFilter{StatusCode: new("abc")}, "status_code"},
		{sluice.DeliveryFilter{StatusCode: new("600")}, "status_code"},
		{sluice.DeliveryFilter{StatusCode: new("599-500")}, "status_code"},
		{sluice.DeliveryFilter{StatusCode: new("500-")}, "status_code"},
		{sluice.DeliveryFilter{EventType: new("inv*ce")}, "event_type"},
		{sluice.DeliveryFilter{EventType: new("*")}, "event_type"},
		{sluice.DeliveryFilter{Since: at(0), Until: at(0)}, "until"},
	} {
		_, err := b.ctl.Deliveries(ctx, b.owner, c.f, sluice.PageParams{Limit: 10})
		var v *sluice.ValidationError
		require.ErrorAs(t, err, &v)
		require.Equal(t, c.field, v.Fields[0].Field)
	}
}

func TestSearchEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := seedSearch(t, b)
	e := r.events
	find := func(who control.Caller, f sluice.EventFilter) []uuid.UUID {
		t.Helper()
		page, err := b.ctl.Events(ctx, who, f, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		out := make([]uuid.UUID, len(page.Items))
		for i, ev := range page.Items {
			out[i] = ev.ID
		}
		return out
	}
	at := func(h time.Duration) *time.Time { return new(r.t0.Add(h)) }

	require.Equal(t, []uuid.UUID{e[3], e[2], e[1], e[0]}, find(b.owner, sluice.EventFilter{}))
	require.Equal(t, []uuid.UUID{e[3], e[2]}, find(b.owner, sluice.EventFilter{Since: at(-time.Hour)}))
	require.Equal(t, []uuid.UUID{e[3], e[1], e[0]}, find(b.owner, sluice.EventFilter{Type: new("invoice.*")}))
	require.Equal(t, []uuid.UUID{e[1]}, find(b.owner, sluice.EventFilter{Filter: new(`{"amount": {"$gte": 100}}`)}))
	require.Equal(t, []uuid.UUID{e[3], e[0]}, find(b.owner, sluice.EventFilter{Type: new("invoice.*"), Filter: new(`{"amount": {"$lt": 100}}`)}))
	require.Empty(t, find(r.portal, sluice.EventFilter{}), "none is addressed to the consumer")
	var walked []uuid.UUID
	p := sluice.PageParams{Limit: 1}
	for range 5 {
		page, err := b.ctl.Events(ctx, b.owner, sluice.EventFilter{Until: at(-time.Hour + time.Second)}, p)
		require.NoError(t, err)
		for _, ev := range page.Items {
			walked = append(walked, ev.ID)
		}
		if page.Next == nil {
			break
		}
		p.After = page.Next
	}
	require.Equal(t, []uuid.UUID{e[2], e[1], e[0]}, walked, "pages of one walk a range once")

	for _, c := range []struct {
		f     sluice.EventFilter
		field string
	}{
		{sluice.EventFilter{Filter: new(`{"amount": {"$gt": true}}`)}, "filter.amount.$gt"},
		{sluice.EventFilter{Filter: new(`{"amount"`)}, "filter"},
		{sluice.EventFilter{Type: new("a*")}, "type"},
		{sluice.EventFilter{Since: at(0), Until: at(-time.Hour)}, "until"},
	} {
		_, err := b.ctl.Events(ctx, b.owner, c.f, sluice.PageParams{Limit: 10})
		var v *sluice.ValidationError
		require.ErrorAs(t, err, &v)
		require.Equal(t, c.field, v.Fields[0].Field)
	}
}
