package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// sweepBundle is a store with one tenant's endpoint subscribed to
// everything, an event fanned out to it, and a sweeper; nothing works jobs.
type sweepBundle struct {
	t          *testing.T
	ctx        context.Context
	f          storetest.Fixture
	sweeper    *dispatch.Sweeper
	endpointID uuid.UUID
	eventID    uuid.UUID
}

func setupSweep(t *testing.T) *sweepBundle {
	t.Helper()
	t.Parallel()
	b := &sweepBundle{t: t, ctx: context.Background(), f: storetest.New(t)}
	ep, _, err := b.f.Store.CreateEndpoint(b.ctx, b.f.TenantA.ID, sluice.EndpointSettings{URL: "http://127.0.0.1:9/", MaxInFlight: 1})
	require.NoError(t, err)
	b.endpointID = ep.ID
	_, err = b.f.Store.CreateSubscription(b.ctx, b.f.TenantA.ID, ep.ID, []string{"*"})
	require.NoError(t, err)
	ev, _, err := fanout.InsertOne(b.ctx, b.f.Store, b.f.TenantA.ID, sluice.NewEvent{Type: "a.b", Payload: []byte(`{}`)}, b.f.Jobs)
	require.NoError(t, err)
	b.eventID = ev.ID
	b.sweeper = dispatch.NewSweeper(b.f.Store, b.f.Jobs, dispatch.SweepConfig{
		Interval: time.Millisecond, WalkInterval: time.Millisecond, RescueGrace: 3 * time.Second,
	})
	return b
}

// sweep runs one sweep (the turn of 1ms is always open by the next call).
func (b *sweepBundle) sweep() {
	b.t.Helper()
	time.Sleep(2 * time.Millisecond)
	require.NoError(b.t, b.sweeper.Sweep(b.ctx))
}

// job is one River job row, as far as these tests care.
type job struct {
	ID    int64
	Kind  string
	State string
	Args  string
}

func (b *sweepBundle) jobs() []job {
	b.t.Helper()
	rows, err := b.f.Store.Pool().Query(b.ctx, `SELECT id, kind, state::text, args::text FROM river_job ORDER BY id`)
	require.NoError(b.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
	require.NoError(b.t, err)
	return out
}

// runJob marks a job as fetched by a worker ago: running, attempt 1.
func (b *sweepBundle) runJob(id int64, ago time.Duration) {
	b.t.Helper()
	_, err := b.f.Store.Pool().Exec(b.ctx, `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - make_interval(secs => $2), attempted_by = '{dead-client}' WHERE id = $1`, id, ago.Seconds())
	require.NoError(b.t, err)
}

func kinds(js []job, state string) []string {
	var out []string
	for _, j := range js {
		if j.State == state {
			out = append(out, j.Kind)
		}
	}
	return out
}

// TestSweepReplacesDeadRunsOnly: a fan-out job shown as running whose lease
// is free is replaced by a new job with the same arguments; one whose lease
// a live session holds, or that started within the grace period, is not.
func TestSweepReplacesDeadRunsOnly(t *testing.T) {
	b := setupSweep(t)
	fanout := b.jobs()[0]
	require.Equal(t, "fanout", fanout.Kind)

	b.runJob(fanout.ID, time.Second) // fetched a moment ago: its run may be taking its lease
	b.sweep()
	require.Equal(t, []string{"fanout"}, kinds(b.jobs(), "running"), "within the grace period")

	b.runJob(fanout.ID, 10*time.Second)
	live := jobs.NewLeaseHolder(jobs.LeaseConfig{ConnConfig: b.f.Store.Pool().Config().ConnConfig})
	held, err := live.Acquire(b.ctx, fanout.ID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, kinds(b.jobs(), "running"), "a live run holds the lease")

	held.Release()
	live.Close()
	b.sweep()
	js := b.jobs()
	require.Len(t, js, 2)
	require.Equal(t, "cancelled", js[0].State, "the dead run's job is given up")
	require.Equal(t, "available", js[1].State)
	require.Equal(t, fanout.Kind, js[1].Kind)
	require.JSONEq(t, fanout.Args, js[1].Args, "the replacement does the same work")
}

// TestSweepQueuesDispatchForUnservedEndpointsOnly: an endpoint with a due
// delivery and no dispatch job gets exactly one; not while a job of its own
// is live, and not while it is throttled.
func TestSweepQueuesDispatchForUnservedEndpointsOnly(t *testing.T) {
	b := setupSweep(t)
	_, created, err := fanout.Events(b.ctx, b.f.Store, []uuid.UUID{b.eventID}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, created)

	b.sweep()
	require.Equal(t, []string{"fanout", "dispatch"}, kinds(b.jobs(), "available"))
	b.sweep()
	require.Len(t, b.jobs(), 2, "a live dispatch job is enough")

	// A dispatch job whose run died is replaced, not joined by a second one.
	dispatchJob := b.jobs()[1]
	b.runJob(dispatchJob.ID, 10*time.Second)
	b.sweep()
	js := b.jobs()
	require.Len(t, js, 3)
	require.Equal(t, "cancelled", js[1].State)
	require.Equal(t, "dispatch", js[2].Kind)
	require.JSONEq(t, dispatchJob.Args, js[2].Args)

	// Throttled, with no job: nothing until the throttle lifts.
	_, err = b.f.Store.Pool().Exec(b.ctx, `DELETE FROM river_job WHERE kind = 'dispatch'`)
	require.NoError(t, err)
	_, err = b.f.Store.Pool().Exec(b.ctx, `INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
		VALUES ($1, now() + interval '1 hour', '429', 1)`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, kinds(b.jobs(), "available"), "a throttled endpoint is left to its parked job")
	ids, err := b.f.Store.EndpointsNeedingDispatch(b.ctx, 10, uuid.Nil)
	require.NoError(t, err)
	require.Empty(t, ids)
}

// TestSweepQueuesRetriesWhenDueWithoutWalking: with the walk of every
// endpoint not due for an hour, an endpoint with a delivery due gets a
// dispatch job only once the retry time its last run left is due, and that
// time is cleared as the job is queued.
func TestSweepQueuesRetriesWhenDueWithoutWalking(t *testing.T) {
	b := setupSweep(t)
	b.sweeper = dispatch.NewSweeper(b.f.Store, b.f.Jobs, dispatch.SweepConfig{
		Interval: time.Millisecond, WalkInterval: time.Hour, RescueGrace: 3 * time.Second,
	})
	_, err := b.f.Store.Pool().Exec(b.ctx, `UPDATE sweeps SET swept_at = now() WHERE name = 'dispatch-walk'`)
	require.NoError(t, err)
	_, created, err := fanout.Events(b.ctx, b.f.Store, []uuid.UUID{b.eventID}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, created)
	retryDue := func() *time.Time {
		var at *time.Time
		require.NoError(t, b.f.Store.Pool().QueryRow(b.ctx, `SELECT retry_due_at FROM endpoints WHERE id = $1`, b.endpointID).Scan(&at))
		return at
	}

	b.sweep()
	require.Equal(t, []string{"fanout"}, kinds(b.jobs(), "available"), "no walk, no retry time: nothing")

	_, err = b.f.Store.Pool().Exec(b.ctx, `UPDATE endpoints SET retry_due_at = now() + interval '1 hour' WHERE id = $1`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, kinds(b.jobs(), "available"), "the retry is not due yet")
	require.NotNil(t, retryDue())

	_, err = b.f.Store.Pool().Exec(b.ctx, `UPDATE endpoints SET retry_due_at = now() - interval '1 second' WHERE id = $1`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout", "dispatch"}, kinds(b.jobs(), "available"))
	require.Nil(t, retryDue(), "taken")
}

// TestSweepTakesTurns: across processes a sweep runs once per interval.
func TestSweepTakesTurns(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := context.Background()
	first, err := f.Store.ClaimSweep(ctx, "dispatch", time.Hour)
	require.NoError(t, err)
	require.True(t, first)
	second, err := f.Store.ClaimSweep(ctx, "dispatch", time.Hour)
	require.NoError(t, err)
	require.False(t, second, "the turn is taken for the next hour")
}

// TestSweepReplacesDeadReplayJobs: a bulk replay job whose run died is
// replaced like a fan-out's, with the same request.
func TestSweepReplacesDeadReplayJobs(t *testing.T) {
	b := setupSweep(t)
	requestID := uuid.New()
	require.NoError(t, b.f.Store.InTx(b.ctx, func(ctx context.Context, tx pgx.Tx) error {
		return b.f.Jobs.Replay(ctx, tx, requestID, b.endpointID)
	}))
	js := b.jobs()
	replay := js[len(js)-1]
	require.Equal(t, "replay", replay.Kind)
	b.runJob(replay.ID, 10*time.Second)
	b.sweep()
	js = b.jobs()
	require.Equal(t, "cancelled", js[len(js)-2].State, "the dead run's job is given up")
	require.Equal(t, "replay", js[len(js)-1].Kind)
	require.Equal(t, "available", js[len(js)-1].State)
	require.JSONEq(t, replay.Args, js[len(js)-1].Args, "the replacement replays the same request")
}
