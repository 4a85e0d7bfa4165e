package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestCoalescedWhileInFlightIsSentAgain: the claim locks nothing, so a
// fan-out may re-point a claimed, in-flight delivery at a newer event.
// Recording the older event's attempt then keeps the delivery pending and
// due, so the newer payload is sent too: nothing newer is lost.
func TestCoalescedWhileInFlightIsSentAgain(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep := storetest.NewEndpoint(t, f, "h")
	_, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, ep, []string{"*"}, nil)
	require.NoError(t, err)
	key := "user-1"
	post := func(payload string) uuid.UUID {
		ev, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "profile.updated", Payload: []byte(payload), CoalesceKey: &key}, f.Jobs)
		require.NoError(t, err)
		_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{ev.ID}, nil)
		require.NoError(t, err)
		return ev.ID
	}
	db := dispatch.NewDB(f.Store)
	older := post(`{"v":1}`)
	claimed, err := db.ClaimUnlocked(ctx, ep, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, older, claimed[0].EventID)

	newer := post(`{"v":2}`) // re-points the in-flight delivery
	require.NoError(t, db.RecordUnlocked(ctx, []dispatch.Outcome{{
		DeliveryID: claimed[0].ID, EventID: older, Status: sluice.DeliveryDelivered,
		At: time.Now(), StatusCode: 200, LatencyMS: 5,
	}}))

	again, err := db.ClaimUnlocked(ctx, ep, 10)
	require.NoError(t, err)
	require.Len(t, again, 1, "the delivery is due again")
	require.Equal(t, claimed[0].ID, again[0].ID)
	require.Equal(t, newer, again[0].EventID, "with the newer event")
}
