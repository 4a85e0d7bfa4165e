package fanout_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestMadeIsWhatAClaimReturns: the deliveries the one-statement insert
// reports, which ingest hands to lingering runs (dispatch.Nudger.Hand),
// are exactly what a claim of their endpoints returns, payload, times and
// trace context included; a run sends either the same way.
func TestMadeIsWhatAClaimReturns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	a, b := subscribed(t, f, "made.a"), newEndpoint(t, f, "made-b")
	_, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, b, []string{"made.*"}, nil)
	require.NoError(t, err)

	_, made, err := fanout.Insert(ctx, f.Store, []fanout.TenantEvent{
		{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "made.a", Payload: []byte(`{"n": 1}`),
			TraceContext: []byte(`{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)}},
		{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "made.b", Payload: []byte(`{"n": 2}`)}},
	}, f.Jobs)
	require.NoError(t, err)
	require.Len(t, made[a], 1)
	require.Len(t, made[b], 2)

	db := dispatch.NewDB(f.Store)
	for id, handed := range made {
		claimed, err := db.ClaimUnlocked(ctx, id, 10)
		require.NoError(t, err)
		require.Len(t, claimed, len(handed))
		byID := map[uuid.UUID]dispatch.Claimed{}
		for _, c := range claimed {
			byID[c.ID] = c
		}
		for _, got := range handed {
			want, ok := byID[got.ID]
			require.True(t, ok, "handed %s, not claimed", got.ID)
			require.JSONEq(t, string(want.Payload), string(got.Payload))
			require.JSONEq(t, string(orEmpty(want.TraceContext)), string(orEmpty(got.TraceContext)))
			got.Payload, want.Payload, got.TraceContext, want.TraceContext = nil, nil, nil, nil
			require.True(t, got.NextAttemptAt.Equal(want.NextAttemptAt))
			require.True(t, got.EventCreatedAt.Equal(want.EventCreatedAt))
			got.NextAttemptAt, got.EventCreatedAt = want.NextAttemptAt, want.EventCreatedAt // equal, in other locations
			require.Equal(t, want, got)
		}
	}
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte(`{}`)
	}
	return b
}
