package fanout_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/stmtcount"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestPlainPostStatements holds the post path of a tenant that uses no
// feature (no filter, FIFO, consumer, trace, coalesce or idempotency key)
// to what it takes: a group of single posts, one event or 20, is one
// statement (InsertRoutedEvents) and its settings, whatever the number of
// deliveries. A feature that adds a statement to every post fails here.
func TestPlainPostStatements(t *testing.T) {
	t.Parallel()
	f := stmtcount.New(t)
	for _, typ := range []string{"order.paid", "order.paid", "order.*"} { // two endpoints of one type, one by pattern
		subscribed(t, f.Fixture, typ)
	}
	group := func(n int) []fanout.TenantEvent {
		evs := make([]fanout.TenantEvent, n)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "order.paid", Payload: []byte(`{"n":1}`)}}
		}
		return evs
	}
	for _, n := range []int{1, 20} {
		f.Counter.Start()
		const posts = 10
		for range posts {
			_, touched, err := fanout.Insert(t.Context(), f.Store, group(n), f.Jobs)
			require.NoError(t, err)
			require.Len(t, touched, 3)
		}
		counts := f.Counter.Stop()
		t.Logf("%d groups of %d events, %d deliveries each:\n%s", posts, n, 3*n, counts)
		require.Equal(t, stmtcount.Counts{"InsertRoutedEvents": posts}, counts,
			"one statement per group of %d, its settings carried by its connection", n)
	}
}

// TestOneStatementFiltersOnlyFilteringTenants: in one group, the events of
// a tenant with a filtered subscription reach it only when their payload
// matches, and those of a tenant without filters (whose payloads the
// statement does not read as jsonb) reach their endpoints whatever their
// payload.
func TestOneStatementFiltersOnlyFilteringTenants(t *testing.T) {
	t.Parallel()
	f := stmtcount.New(t)
	ctx := t.Context()
	gold, err := filter.Parse([]byte(`{"tier": "gold"}`))
	require.NoError(t, err)
	epA := newEndpoint(t, f.Fixture, "a")
	_, err = f.Store.CreateSubscription(ctx, f.TenantA.ID, epA, []string{"order.paid"}, &store.Filter{JSON: []byte(gold.String()), JSONPath: gold.JSONPath()})
	require.NoError(t, err)
	epB, err := f.Store.CreateEndpoint(ctx, f.TenantB.ID, sluice.EndpointSettings{URL: "https://example.com/b", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	_, err = f.Store.CreateSubscription(ctx, f.TenantB.ID, epB.ID, []string{"order.paid"}, nil)
	require.NoError(t, err)

	post := func(tenant uuid.UUID, payload string) fanout.TenantEvent {
		return fanout.TenantEvent{TenantID: tenant, Event: sluice.NewEvent{Type: "order.paid", Payload: []byte(payload)}}
	}
	evs, touched, err := fanout.Insert(ctx, f.Store, []fanout.TenantEvent{
		post(f.TenantA.ID, `{"tier": "gold"}`), post(f.TenantA.ID, `{"tier": "tin"}`),
		post(f.TenantB.ID, `{"tier": "gold"}`), post(f.TenantB.ID, `{"tier": "tin"}`), post(f.TenantB.ID, `[1, 2]`),
	}, f.Jobs)
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{epA, epB.ID}, slices.Collect(maps.Keys(touched)))
	var got []bool
	for _, ev := range evs {
		var n int
		require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE event_id = $1`, ev.ID).Scan(&n))
		got = append(got, n == 1)
	}
	require.Equal(t, []bool{true, false, true, true, true}, got, "A's filter lets gold through; B has none")
}

// TestPlainPostAllocations holds the allocations a plain tenant's post
// makes in this process for each event of a group (building the
// statement's arrays, reading its deliveries back) to what they are: a
// feature that adds work per event or per delivery on this path fails
// here. The group's fixed cost (pgx's batch, the statement) is left out by
// comparing a group of 20 with a group of one. Not parallel: AllocsPerRun
// counts the whole process's allocations.
func TestPlainPostAllocations(t *testing.T) { //nolint:paralleltest // AllocsPerRun
	f := stmtcount.New(t)
	for _, typ := range []string{"order.paid", "order.paid", "order.*"} {
		subscribed(t, f.Fixture, typ)
	}
	allocs := func(n int) float64 {
		evs := make([]fanout.TenantEvent, n)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "order.paid", Payload: []byte(`{"n":1}`)}}
		}
		return testing.AllocsPerRun(20, func() {
			_, _, err := fanout.Insert(t.Context(), f.Store, evs, f.Jobs)
			require.NoError(t, err)
		})
	}
	one, twenty := allocs(1), allocs(20)
	perEvent := (twenty - one) / 19
	t.Logf("allocations: %.0f for a group of 1, %.0f for 20: %.1f an event (3 deliveries each)", one, twenty, perEvent)
	require.LessOrEqual(t, perEvent, plainPostAllocsPerEvent, "allocations per event of a plain tenant's group")
}

// plainPostAllocsPerEvent is a little above TestPlainPostAllocations's
// reading (28.1, under the race detector too): room for a dependency's
// change, not for a statement's worth.
const plainPostAllocsPerEvent = 34.0
