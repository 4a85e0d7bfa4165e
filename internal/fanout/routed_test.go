package fanout_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestOneStatementRoutesAsTheTransactionDoes posts every kind of event the
// one statement takes (InsertRoutedEvents; types matched exactly, by a
// prefix and by "*", or by nothing; the tenant's own or broadcast; two
// tenants) twice: in a small group, stored, routed and fanned out by the
// statement, and in a large one, routed by the transaction
// (SubscriptionsForEvents in Go). Both make the same deliveries, one per
// endpoint however many of its subscriptions match, none to a disabled
// endpoint or another tenant's, and to consumers' endpoints only for a
// broadcast.
func TestOneStatementRoutesAsTheTransactionDoes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	for _, uid := range []string{"cus_1", "cus_2"} {
		_, _, err := f.Store.UpsertConsumer(ctx, f.TenantA.ID, uid, sluice.ConsumerSettings{Name: uid})
		require.NoError(t, err)
	}
	endpoint := func(tenant uuid.UUID, name string, consumer *string, disabled bool, subs ...[]string) uuid.UUID {
		ep, err := f.Store.CreateEndpoint(ctx, tenant, sluice.EndpointSettings{
			URL: "https://example.com/" + name, MaxInFlight: 10, Consumer: consumer, Disabled: disabled,
		}, storetest.Secret)
		require.NoError(t, err)
		for _, types := range subs {
			_, err := f.Store.CreateSubscription(ctx, tenant, ep.ID, types, nil)
			require.NoError(t, err)
		}
		return ep.ID
	}
	cus1, cus2 := "cus_1", "cus_2"
	names := map[uuid.UUID]string{
		endpoint(f.TenantA.ID, "own-prefix", nil, false, []string{"invoice.*"}):                          "own-prefix",
		endpoint(f.TenantA.ID, "own-all", nil, false, []string{"*"}):                                     "own-all",
		endpoint(f.TenantA.ID, "own-twice", nil, false, []string{"invoice.paid"}, []string{"invoice.*"}): "own-twice",
		endpoint(f.TenantA.ID, "own-disabled", nil, true, []string{"*"}):                                 "own-disabled",
		endpoint(f.TenantA.ID, "cus1-exact", &cus1, false, []string{"invoice.paid", "user.created"}):     "cus1-exact",
		endpoint(f.TenantA.ID, "cus2-other", &cus2, false, []string{"user.*"}):                           "cus2-other",
		endpoint(f.TenantB.ID, "b-all", nil, false, []string{"*"}):                                       "b-all",
	}
	var kinds []fanout.TenantEvent
	for _, tenant := range []uuid.UUID{f.TenantA.ID, f.TenantB.ID} {
		for _, typ := range []string{"invoice.paid", "invoice.paid.late", "user.created", "audit"} {
			for _, broadcast := range []bool{false, true} {
				ev := sluice.NewEvent{Type: typ, Payload: []byte(`{}`), Broadcast: broadcast}
				kinds = append(kinds, fanout.TenantEvent{TenantID: tenant, Event: ev})
			}
		}
	}
	// reached stores evs as one group and names, for each, the endpoints
	// it made deliveries to.
	reached := func(evs []fanout.TenantEvent) []string {
		out, _, err := fanout.Insert(ctx, f.Store, evs, f.Jobs)
		require.NoError(t, err)
		got := make([]string, len(out))
		for i, ev := range out {
			rows, err := f.Store.Pool().Query(ctx, `SELECT endpoint_id FROM deliveries WHERE event_id = $1`, ev.ID)
			require.NoError(t, err)
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			require.NoError(t, err)
			eps := []string{}
			for _, id := range ids {
				eps = append(eps, names[id])
			}
			slices.Sort(eps)
			got[i] = fmt.Sprint(eps)
		}
		return got
	}
	require.LessOrEqual(t, len(kinds), 32, "a group the one statement takes")
	oneStatement := reached(kinds)
	transaction := reached(slices.Concat(kinds, kinds, kinds))[:len(kinds)]
	for i, kind := range kinds {
		ev := kind.Event
		require.Equal(t, transaction[i], oneStatement[i], "tenant A %v, %s, broadcast %v",
			kind.TenantID == f.TenantA.ID, ev.Type, ev.Broadcast)
	}
	require.Equal(t, "[own-all own-prefix own-twice]", oneStatement[0], "invoice.paid")
	require.Equal(t, "[cus1-exact own-all own-prefix own-twice]", oneStatement[1], "a broadcast of invoice.paid")
	require.Equal(t, "[own-all]", oneStatement[4], "user.created")
	require.Equal(t, "[cus1-exact cus2-other own-all]", oneStatement[5], "a broadcast of user.created")
	require.Equal(t, "[b-all]", oneStatement[8], "tenant B's invoice.paid")
}

// TestDeliveryIDsSortAsTheirEvents: the one statement names a delivery
// after its event (sluice_delivery_id), so an endpoint's deliveries, read
// in id order as the claim breaks ties, come in the order of their events,
// within a group and across groups, and each endpoint's delivery of an
// event has an id of its own.
func TestDeliveryIDsSortAsTheirEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	first, second := subscribed(t, f, "order.x"), subscribed(t, f, "order.x")
	var posted []uuid.UUID
	for range 3 {
		evs := make([]fanout.TenantEvent, 10)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "order.x", Payload: []byte(`{}`)}}
		}
		out, _, err := fanout.Insert(ctx, f.Store, evs, f.Jobs)
		require.NoError(t, err)
		for _, ev := range out {
			posted = append(posted, ev.ID)
		}
	}
	for _, ep := range []uuid.UUID{first, second} {
		rows, err := f.Store.Pool().Query(ctx, `SELECT event_id FROM deliveries WHERE endpoint_id = $1 ORDER BY id`, ep)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		require.Equal(t, posted, got, "endpoint %s", ep)
	}
	var ids int
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT count(DISTINCT id) FROM deliveries`).Scan(&ids))
	require.Equal(t, 2*len(posted), ids)
}

// TestOperationalEventsReachTheTenantAndTheirConsumer: an operational
// event about a consumer's endpoint (addressed to that consumer) reaches
// the tenant's own endpoints and that consumer's subscribed to it, never
// another consumer's, a disabled one's, or one subscribed to "*"; one
// about the tenant's own endpoint only the tenant's own.
func TestOperationalEventsReachTheTenantAndTheirConsumer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	for _, uid := range []string{"cus_1", "cus_2"} {
		_, _, err := f.Store.UpsertConsumer(ctx, f.TenantA.ID, uid, sluice.ConsumerSettings{Name: uid})
		require.NoError(t, err)
	}
	names := map[uuid.UUID]string{}
	endpoint := func(name string, consumer *string, disabled bool, types ...string) {
		ep, err := f.Store.CreateEndpoint(ctx, f.TenantA.ID, sluice.EndpointSettings{
			URL: "https://example.com/" + name, MaxInFlight: 10, Consumer: consumer, Disabled: disabled,
		}, storetest.Secret)
		require.NoError(t, err)
		_, err = f.Store.CreateSubscription(ctx, f.TenantA.ID, ep.ID, types, nil)
		require.NoError(t, err)
		names[ep.ID] = name
	}
	cus1, cus2 := "cus_1", "cus_2"
	endpoint("own-sluice", nil, false, "sluice.*")
	endpoint("own-exact", nil, false, "sluice.endpoint.disabled")
	endpoint("own-star", nil, false, "*")
	endpoint("own-disabled", nil, true, "sluice.*")
	endpoint("cus1-prefix", &cus1, false, "sluice.endpoint.*")
	endpoint("cus1-star", &cus1, false, "*")
	endpoint("cus2-sluice", &cus2, false, "sluice.*")
	reached := func(consumer *string) string {
		out, _, err := fanout.Insert(ctx, f.Store, []fanout.TenantEvent{{TenantID: f.TenantA.ID, Event: sluice.NewEvent{
			Type: sluice.OpEndpointDisabled, Payload: []byte(`{}`), Consumer: consumer,
		}}}, f.Jobs)
		require.NoError(t, err)
		rows, err := f.Store.Pool().Query(ctx, `SELECT endpoint_id FROM deliveries WHERE event_id = $1`, out[0].ID)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		eps := []string{}
		for _, id := range ids {
			eps = append(eps, names[id])
		}
		slices.Sort(eps)
		return fmt.Sprint(eps)
	}
	require.Equal(t, "[cus1-prefix own-exact own-sluice]", reached(&cus1), "about cus_1's endpoint")
	require.Equal(t, "[own-exact own-sluice]", reached(nil), "about the tenant's own endpoint")
}
