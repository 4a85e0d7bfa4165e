package dispatch_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestDispatchStepsPlanOncePerConnection: the statements of a dispatch
// step (a locked claim: the endpoint's lock, the claim, the record; a
// finish: the endpoint's lock, the final check) run their generic plan
// from the first call, where Postgres's default plans the first five calls
// on each connection for their values, and the claim for its values on
// every call after that too when the generic plan looks dearer.
func TestDispatchStepsPlanOncePerConnection(t *testing.T) {
	t.Parallel()
	f, ep := storetest.WithBacklog(t, 50)
	ctx := t.Context()

	db := dispatch.NewDB(f.Store)
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for range 7 {
		_, err := tx.LockEndpoint(ctx, ep)
		require.NoError(t, err)
		_, err = tx.ClaimDue(ctx, dispatch.ClaimRequest{EndpointID: ep, N: 5})
		require.NoError(t, err)
		require.NoError(t, tx.RecordOutcomes(ctx, nil))
	}
	requireGenericPlans(t, tx, "LockEndpointForDispatch", "ClaimDueDeliveries", "RecordOutcomes")
	require.NoError(t, tx.Commit(ctx))

	// The steps that change River's jobs (finish, park, yield).
	tx, err = db.BeginSync(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for range 7 {
		_, _, err := tx.LockToFinish(ctx, ep)
		require.NoError(t, err)
		_, _, err = tx.NextQueued(ctx, ep, false)
		require.NoError(t, err)
	}
	requireGenericPlans(t, tx, "LockEndpointToFinish", "NextQueuedDelivery")
}

// requireGenericPlans fails the test unless each named statement was
// prepared on tx's connection and ran only its generic plan there.
func requireGenericPlans(t *testing.T, tx *dispatch.StepTx, names ...string) {
	t.Helper()
	rows, err := tx.Tx().Query(t.Context(), `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var sql string
		var generic, custom int64
		require.NoError(t, rows.Scan(&sql, &generic, &custom))
		for _, name := range names {
			if strings.Contains(sql, "-- name: "+name+" ") {
				seen[name] = true
				require.Zero(t, custom, "%s: planned for its values %d times in 7 calls", name, custom)
				require.Positive(t, generic, "%s: its generic plan ran", name)
			}
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, seen, len(names), "each statement was prepared on the step's connection: %v", seen)
}
