package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestClaimPlainManyKeepsEachEndpointToItsOwn: one statement claims for
// several endpoints, each its own due deliveries, oldest first, up to its
// own limit; an endpoint with nothing due gets nothing, and learns when its
// next queued delivery is due (never, with none queued).
func TestClaimPlainManyKeepsEachEndpointToItsOwn(t *testing.T) {
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

	got, err := f.Store.ClaimPlainMany(ctx, []store.ClaimRequest{
		{EndpointID: b, N: 10}, {EndpointID: idle, N: 10}, {EndpointID: a, N: 3}, {EndpointID: later, N: 10},
	})
	require.NoError(t, err)
	require.Len(t, got, 4)
	events := func(claimed []store.Claimed) []uuid.UUID {
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

// TestPartitionWeekMatchesTheDatabase: Go's PartitionWeek and the
// database's sluice_week_start_ms agree on where a week starts (Monday
// 00:00 UTC), at and around week boundaries.
func TestPartitionWeekMatchesTheDatabase(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	monday := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{monday, monday.Add(-time.Millisecond), monday.Add(time.Millisecond),
		monday.Add(3*24*time.Hour + 5*time.Hour), time.Now()} {
		var ms int64
		require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT sluice_week_start_ms($1)`, at.UnixMilli()).Scan(&ms))
		require.Equal(t, store.PartitionWeek(at), time.UnixMilli(ms).UTC(), "week of %s", at)
		require.Equal(t, time.Monday, store.PartitionWeek(at).Weekday())
	}
}

// TestWeekBoundsMatchTheDatabase: the week bounds RecordOutcomes is given
// for each event id are sluice_week_lo's and sluice_week_hi's, for UUIDv7s
// at and around a week boundary and for random ids (whose first 48 bits are
// no time Sluice made), so a delivery is always looked for in the partition
// it is in.
func TestWeekBoundsMatchTheDatabase(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	monday := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	var ids []uuid.UUID
	for _, at := range []time.Time{monday, monday.Add(-time.Millisecond), monday.Add(time.Millisecond), time.Now()} {
		id, err := uuid.NewV7()
		require.NoError(t, err)
		ms := at.UnixMilli()
		for i := range 6 {
			id[i] = byte(ms >> (40 - 8*i))
		}
		ids = append(ids, id)
	}
	ids = append(ids, uuid.New(), uuid.MustParse("fffffffe-0000-4000-8000-000000000000"))
	for _, id := range ids {
		lo, hi := store.WeekBounds(id)
		var dbLo, dbHi uuid.UUID
		// Past 48 bits sluice_week_hi has no uuid to return; Go's is the largest.
		err := f.Store.Pool().QueryRow(t.Context(), `SELECT sluice_week_lo($1),
			CASE WHEN sluice_week_start_ms(sluice_uuid_ms($1)) + 604800000 >= 2^48 THEN $2 ELSE sluice_week_hi($1) END`,
			id, uuid.Max).Scan(&dbLo, &dbHi)
		require.NoError(t, err)
		require.Equal(t, dbLo, lo, "lower bound of %s", id)
		require.Equal(t, dbHi, hi, "upper bound of %s", id)
		require.True(t, bytes.Compare(lo[:], id[:]) <= 0 && bytes.Compare(id[:], hi[:]) < 0, "%s within [%s, %s)", id, lo, hi)
	}
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
	claim := func(n int, after store.Position) store.Claim {
		got, err := f.Store.ClaimPlainMany(ctx, []store.ClaimRequest{{EndpointID: ep, N: n, After: after}})
		require.NoError(t, err)
		return got[0]
	}
	events := func(c store.Claim) []uuid.UUID {
		var ids []uuid.UUID
		for _, d := range c.Deliveries {
			ids = append(ids, d.EventID)
		}
		return ids
	}
	first := claim(2, store.Position{})
	require.Equal(t, posted[:2], events(first), "from the front: the two oldest")
	rest := claim(10, first.Deliveries[1].Position())
	require.Equal(t, posted[2:], events(rest), "after the second: the other three")
	none := claim(10, rest.Deliveries[2].Position())
	require.Empty(t, none.Deliveries, "after the last: nothing")
	require.Nil(t, none.NextDue, "and nothing queued after it")
	require.Equal(t, posted, events(claim(10, store.Position{})), "from the front again: all five, none claimed away")
}

// subscribed creates an endpoint of tenant A subscribed to typ.
func subscribed(t testing.TB, f storetest.Fixture, typ string) uuid.UUID {
	t.Helper()
	ep := newEndpoint(t, f, typ)
	_, err := f.Store.CreateSubscription(t.Context(), f.TenantA.ID, ep, []string{typ})
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
