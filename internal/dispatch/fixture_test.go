package dispatch_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// subscribed creates an endpoint of tenant A subscribed to typ.
func subscribed(t testing.TB, f storetest.Fixture, typ string) uuid.UUID {
	t.Helper()
	ep := storetest.NewEndpoint(t, f, typ)
	_, err := f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep, []string{typ}, nil)
	require.NoError(t, err)
	return ep
}

// postEvents posts n events of typ for tenant A, fanning each out, and
// returns their ids in order.
func postEvents(t *testing.T, f storetest.Fixture, typ string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for range n {
		ev, _, err := fanout.InsertOne(t.Context(), f.Store, f.TenantA.ID, sluice.NewEvent{Type: typ, Payload: []byte(`{}`)}, f.Jobs)
		require.NoError(t, err)
		_, _, err = fanout.Events(t.Context(), f.Store, []uuid.UUID{ev.ID}, nil)
		require.NoError(t, err)
		ids = append(ids, ev.ID)
	}
	return ids
}
