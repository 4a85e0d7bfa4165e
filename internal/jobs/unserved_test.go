package jobs_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestWalkGoesOnAfterItsPosition: the sweeper's walk looks at endpoints
// with deliveries queued in id order, up to its limit, answers those with
// deliveries due and no job, and says where it stopped when it looked at
// as many as it may, so that the next walk goes on from there.
func TestWalkGoesOnAfterItsPosition(t *testing.T) {
	t.Parallel()
	db, eps := dueEndpoints(t, "a", "b", "c")
	ctx := t.Context()

	all, err := jobs.EndpointsNeedingDispatch(ctx, db, 10, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{Due: eps}, all, "every one, in id order, and the end reached")
	two, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{Due: eps[:2], Last: eps[1]}, two, "the first two, and where it stopped")
	rest, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, two.Last)
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{Due: eps[2:]}, rest, "after the second, only the third")
	none, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, eps[2])
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{}, none, "nothing after the last")
}

// TestWalkCountsHeldEndpoints: an endpoint held by a throttle takes one of
// a walk's steps though it needs no job, so a walk looks at no more
// endpoints than its limit however many are held, and the next walk
// reaches the ones past them.
func TestWalkCountsHeldEndpoints(t *testing.T) {
	t.Parallel()
	db, eps := dueEndpoints(t, "a", "b", "c")
	ctx := t.Context()
	for _, ep := range eps[:2] {
		_, err := db.Exec(ctx, `INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
			VALUES ($1, now() + interval '1 hour', '429', 1)`, ep)
		require.NoError(t, err)
	}

	first, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{Last: eps[1]}, first, "two held endpoints fill the walk")
	next, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, first.Last)
	require.NoError(t, err)
	require.Equal(t, jobs.Walk{Due: eps[2:]}, next, "the next walk reaches the third")
}

// dueEndpoints makes a database with an endpoint per path, each with a
// delivery due and no job, and returns its pool and the endpoints in id
// order.
func dueEndpoints(t *testing.T, paths ...string) (*pgxpool.Pool, []uuid.UUID) {
	t.Helper()
	f := storetest.New(t)
	var eps []uuid.UUID
	for _, path := range paths {
		ep := newEndpoint(t, f, path)
		storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, 1)
		eps = append(eps, ep)
	}
	slices.SortFunc(eps, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return f.Store.Pool(), eps
}
