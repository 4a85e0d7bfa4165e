package store_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/storetest"
)

// TestWideGroupsFanOutByJob stores two groups of events for 40 endpoints:
// one whose deliveries fit under store.MaxInlineDeliveries, made in its
// commit, and one just over it, left whole to a fan-out job.
func TestWideGroupsFanOutByJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	const endpoints = 40
	for i := range endpoints {
		ep := newEndpoint(t, f, fmt.Sprint(i))
		_, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, ep, []string{"*"})
		require.NoError(t, err)
	}
	group := func(n int) []store.TenantEvent {
		evs := make([]store.TenantEvent, n)
		for i := range evs {
			evs[i] = store.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "t.x", Payload: []byte(`{}`)}}
		}
		return evs
	}
	fits := store.MaxInlineDeliveries / endpoints

	out, touched, err := f.Store.CreateTenantEvents(ctx, group(fits), f.Jobs)
	require.NoError(t, err)
	require.Len(t, touched, endpoints)
	require.Equal(t, fits*endpoints, deliveriesOf(t, f, out))
	require.Zero(t, fanoutJobs(t, f))

	out, touched, err = f.Store.CreateTenantEvents(ctx, group(fits+1), f.Jobs)
	require.NoError(t, err)
	require.Empty(t, touched)
	require.Zero(t, deliveriesOf(t, f, out), "none made in the commit")
	require.Equal(t, 1, fanoutJobs(t, f), "one job for the whole group")
}

func deliveriesOf(t *testing.T, f storetest.Fixture, evs []sluice.Event) int {
	t.Helper()
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM deliveries WHERE event_id = ANY($1)`, ids).Scan(&n))
	return n
}

func fanoutJobs(t *testing.T, f storetest.Fixture) int {
	t.Helper()
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'fanout'`).Scan(&n))
	return n
}
