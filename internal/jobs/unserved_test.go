package jobs_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestWalkGoesOnAfterItsPosition: the sweeper's walk lists endpoints with
// deliveries due and no job in id order, up to its limit, and from a
// position lists only those after it, so a walk can go on where the last
// one stopped.
func TestWalkGoesOnAfterItsPosition(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	var eps []uuid.UUID
	for _, path := range []string{"a", "b", "c"} {
		ep := newEndpoint(t, f, path)
		storetest.DueBacklog(t, f.Store.Pool(), f.TenantA.ID, ep, 1)
		eps = append(eps, ep)
	}
	slices.SortFunc(eps, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	ctx := t.Context()
	db := f.Store.Pool()

	all, err := jobs.EndpointsNeedingDispatch(ctx, db, 10, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, eps, all, "every one, in id order")
	two, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, uuid.Nil)
	require.NoError(t, err)
	require.Equal(t, eps[:2], two, "the first two")
	rest, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, two[1])
	require.NoError(t, err)
	require.Equal(t, eps[2:], rest, "after the second, only the third")
	none, err := jobs.EndpointsNeedingDispatch(ctx, db, 2, eps[2])
	require.NoError(t, err)
	require.Empty(t, none, "nothing after the last")
}
