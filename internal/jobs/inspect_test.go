package jobs_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestLiveLookups: the statements that ask which endpoints and events have
// a live job, and the counts the tools read, see the live states alone:
// an endpoint whose job completed has none, a parked one has one that is
// not active.
func TestLiveLookups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	db := f.Store.Pool()
	e1, e2, parked, none := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	ev1, ev2, ev3, ev4 := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	require.NoError(t, f.Store.InTx(ctx, func(tx store.Tx) error {
		require.NoError(t, f.Jobs.Dispatch(ctx, tx, []uuid.UUID{e1, e2}))
		_, err := f.Jobs.DispatchAt(ctx, tx, jobs.DispatchArgs{EndpointID: parked}, time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.NoError(t, f.Jobs.FanOut(ctx, tx, []uuid.UUID{ev1, ev2}))
		require.NoError(t, f.Jobs.FanOut(ctx, tx, []uuid.UUID{ev3}))
		return nil
	}))
	_, err := db.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now()
		WHERE args->>'endpoint_id' = $1 OR args->'event_ids' ? $2`, e2.String(), ev3.String())
	require.NoError(t, err)

	live, err := jobs.LiveDispatch(ctx, db, []uuid.UUID{e1, e2, parked, none})
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]bool{e1: true, parked: true}, live)
	fanned, err := jobs.LiveFanout(ctx, db, []uuid.UUID{ev1, ev3, ev4})
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]bool{ev1: true}, fanned)

	counts, err := jobs.CountByKindAndState(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []jobs.KindStateCount{
		{Kind: "dispatch", State: "available", Jobs: 2}, {Kind: "dispatch", State: "completed", Jobs: 1},
		{Kind: "fanout", State: "available", Jobs: 1}, {Kind: "fanout", State: "completed", Jobs: 1},
	}, counts)
	active, err := jobs.CountActiveDispatch(ctx, db, []uuid.UUID{e1, e2, parked})
	require.NoError(t, err)
	require.Equal(t, 1, active, "the parked job is live, not active")
	n, err := jobs.CountLive(ctx, db, []string{jobs.QueueFanout, jobs.QueueDispatch}, nil)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = jobs.CountLive(ctx, db, []string{jobs.QueueFanout, jobs.QueueDispatch}, []uuid.UUID{e1, parked})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the fan-out job alone")

	states, err := jobs.LiveDispatchByState(ctx, db)
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, "available", states[0].State)
	require.Equal(t, 2, states[0].Jobs)
	require.InDelta(t, time.Hour.Seconds(), states[0].LatestIn.Seconds(), 60, "the parked job's due time")

	runs, err := jobs.DispatchRuns(ctx, db, []uuid.UUID{e1, e2})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, r := range runs {
		require.Contains(t, []uuid.UUID{e1, e2}, r.EndpointID)
		require.Nil(t, r.AttemptedAt, "never ran")
		require.Empty(t, r.AttemptedBy)
	}
}

// TestCompletedSinceElection: a completed job counts only if it finished
// after River's current leader was elected.
func TestCompletedSinceElection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	db := f.Store.Pool()
	kind := jobs.RetentionArgs{}.Kind()
	_, err := db.Exec(ctx, `INSERT INTO river_job (kind, args, state, queue, max_attempts, attempt, finalized_at)
		VALUES ($1, '{}', 'completed', 'default', 3, 1, now() - interval '1 hour')`, kind)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO river_leader (elected_at, expires_at, leader_id) VALUES (now() - interval '1 minute', now() + interval '1 minute', 'test')`)
	require.NoError(t, err)
	done, err := jobs.CompletedSinceElection(ctx, db, kind)
	require.NoError(t, err)
	require.False(t, done, "it finished before the election")

	_, err = db.Exec(ctx, `UPDATE river_job SET finalized_at = now() WHERE kind = $1`, kind)
	require.NoError(t, err)
	done, err = jobs.CompletedSinceElection(ctx, db, kind)
	require.NoError(t, err)
	require.True(t, done)
}
