package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestClaimUnlockedManyKeepsEachEndpointToItsOwn: one statement claims for
// several endpoints, each its own due deliveries, oldest first, up to its
// own limit; an endpoint with nothing due gets nothing, and learns when its
// next queued delivery is due (never, with none queued).
func TestClaimUnlockedManyKeepsEachEndpointToItsOwn(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	a, b, idle, later := subscribed(t, f, "a"), subscribed(t, f, "b"), subscribed(t, f, "idle"), subscribed(t, f, "later")
	aEvents, bEvents := postEvents(t, f, "a", 5), postEvents(t, f, "b", 2)
	postEvents(t, f, "later", 2)
	retryAt := time.Now().Add(30 * time.Second).Truncate(time.Microsecond)
	_, err := f.Store.Pool().Exec(ctx, `UPDATE deliveries SET status = 'failed',
		next_attempt_at = $2::timestamptz + CASE WHEN id = (SELECT id FROM deliveries WHERE endpoint_id = $1 ORDER BY id LIMIT 1) THEN interval '0' ELSE interval '1 s' END
		WHERE endpoint_id = $1`, later, retryAt) // its two retries: the earlier one at retryAt
	require.NoError(t, err)

	got, err := dispatch.NewDB(f.Store).ClaimUnlockedMany(ctx, []dispatch.ClaimRequest{
		{EndpointID: b, N: 10}, {EndpointID: idle, N: 10}, {EndpointID: a, N: 3}, {EndpointID: later, N: 10},
	})
	require.NoError(t, err)
	require.Len(t, got, 4)
	events := func(claimed []dispatch.Claimed) []uuid.UUID {
		var ids []uuid.UUID
		for _, c := range claimed {
			ids = append(ids, c.EventID)
		}
		return ids
	}
	require.Equal(t, bEvents, events(got[0].Deliveries), "b: both of its own")
	require.Empty(t, got[1].Deliveries, "nothing due: nothing claimed")
	require.Nil(t, got[1].NextDue, "nothing queued: nothing will be due")
	require.Equal(t, aEvents[:3], events(got[2].Deliveries), "a: its three oldest, up to its limit")
	require.Nil(t, got[2].NextDue)
	require.Empty(t, got[3].Deliveries, "a retry not yet due is not claimed")
	require.NotNil(t, got[3].NextDue)
	require.True(t, retryAt.Equal(*got[3].NextDue), "its retry's time: %s, not %s", retryAt, got[3].NextDue)
}

// TestClaimStartsAfterItsPosition: a claim reads an endpoint's queue after
// the position it is given (where the run's last full claim ended): the
// deliveries behind it are left alone, and with none queued after it the
// claim reports nothing due later either.
func TestClaimStartsAfterItsPosition(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep := subscribed(t, f, "a")
	posted := postEvents(t, f, "a", 5)
	claim := func(n int, after dispatch.Position) dispatch.Claim {
		got, err := dispatch.NewDB(f.Store).ClaimUnlockedMany(ctx, []dispatch.ClaimRequest{{EndpointID: ep, N: n, After: after}})
		require.NoError(t, err)
		return got[0]
	}
	events := func(c dispatch.Claim) []uuid.UUID {
		var ids []uuid.UUID
		for _, d := range c.Deliveries {
			ids = append(ids, d.EventID)
		}
		return ids
	}
	first := claim(2, dispatch.Position{})
	require.Equal(t, posted[:2], events(first), "from the front: the two oldest")
	rest := claim(10, first.Deliveries[1].Position())
	require.Equal(t, posted[2:], events(rest), "after the second: the other three")
	none := claim(10, rest.Deliveries[2].Position())
	require.Empty(t, none.Deliveries, "after the last: nothing")
	require.Nil(t, none.NextDue, "and nothing queued after it")
	require.Equal(t, posted, events(claim(10, dispatch.Position{})), "from the front again: all five, none claimed away")
}
