package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// sweepBundle is a store with one tenant's endpoint subscribed to
// everything, an event fanned out to it, and a sweeper; nothing works jobs.
type sweepBundle struct {
	t          *testing.T
	ctx        context.Context
	f          storetest.Fixture
	sweeper    *Sweeper
	endpointID uuid.UUID
	eventID    uuid.UUID
}

// setupSweep builds a sweepBundle whose sweeper takes every turn: a turn of
// a nanosecond is open again by the next call, since the now() of a later
// transaction is never earlier.
func setupSweep(t *testing.T) *sweepBundle {
	t.Helper()
	t.Parallel()
	b := &sweepBundle{t: t, ctx: context.Background(), f: storetest.New(t)}
	ep, err := b.f.Store.CreateEndpoint(b.ctx, b.f.TenantA.ID, sluice.EndpointSettings{URL: "http://127.0.0.1:9/", MaxInFlight: 1}, storetest.Secret)
	require.NoError(t, err)
	b.endpointID = ep.ID
	_, err = b.f.Store.CreateSubscription(b.ctx, b.f.TenantA.ID, ep.ID, []string{"*"}, nil)
	require.NoError(t, err)
	ev, _, err := fanout.InsertOne(b.ctx, b.f.Store, b.f.TenantA.ID, sluice.NewEvent{Type: "a.b", Payload: []byte(`{}`)}, b.f.Jobs)
	require.NoError(t, err)
	b.eventID = ev.ID
	b.sweeper = b.newSweeper(SweeperConfig{Interval: time.Nanosecond, WalkInterval: time.Nanosecond})
	return b
}

func (b *sweepBundle) newSweeper(cfg SweeperConfig) *Sweeper {
	b.t.Helper()
	if cfg.Nudger == nil {
		cfg.Nudger = dispatch.NewNudger(b.f.Store, b.f.Jobs, dispatch.NudgerConfig{})
	}
	s, err := NewSweeper(b.f.Store, cfg)
	require.NoError(b.t, err)
	return s
}

// sweep runs one sweep.
func (b *sweepBundle) sweep() {
	b.t.Helper()
	require.NoError(b.t, b.sweeper.Sweep(b.ctx))
}

func (b *sweepBundle) jobs() []jobstest.Job {
	b.t.Helper()
	return jobstest.All(b.t, b.f.Store.Pool())
}

// TestSweepReplacesDeadRunsOnly: a fan-out job shown as running whose lease
// is free is replaced by a new job with the same arguments; one whose lease
// a live session holds, or that started within the grace period, is not.
func TestSweepReplacesDeadRunsOnly(t *testing.T) {
	b := setupSweep(t)
	fanout := b.jobs()[0]
	require.Equal(t, "fanout", fanout.Kind)
	db := b.f.Store.Pool()

	jobstest.FetchedBy(t, db, fanout.ID, time.Second) // fetched a moment ago: its run may be taking its lease
	b.sweep()
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "running"), "within the grace period")

	jobstest.FetchedBy(t, db, fanout.ID, 10*time.Second)
	live, err := jobs.NewLeaseHolder(jobs.LeaseConfig{ConnConfig: db.Config().ConnConfig})
	require.NoError(t, err)
	require.NoError(t, live.Start(b.ctx))
	held, err := live.Acquire(b.ctx, fanout.ID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "running"), "a live run holds the lease")

	held.Release()
	live.Stop()
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
	require.Equal(t, []string{"fanout", "dispatch"}, jobstest.Kinds(b.jobs(), "available"))
	b.sweep()
	require.Len(t, b.jobs(), 2, "a live dispatch job is enough")

	// A dispatch job whose run died is replaced, not joined by a second one.
	dispatchJob := b.jobs()[1]
	jobstest.FetchedBy(t, b.f.Store.Pool(), dispatchJob.ID, 10*time.Second)
	b.sweep()
	js := b.jobs()
	require.Len(t, js, 3)
	require.Equal(t, "cancelled", js[1].State)
	require.Equal(t, "dispatch", js[2].Kind)
	require.JSONEq(t, dispatchJob.Args, js[2].Args)

	// Throttled, with no job: nothing until the throttle lifts.
	jobstest.DeleteKind(t, b.f.Store.Pool(), "dispatch")
	_, err = b.f.Store.Pool().Exec(b.ctx, `INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
		VALUES ($1, now() + interval '1 hour', '429', 1)`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "available"), "a throttled endpoint is left to its parked job")
	w, err := jobs.EndpointsNeedingDispatch(b.ctx, b.f.Store.Pool(), 10, uuid.Nil)
	require.NoError(t, err)
	require.Empty(t, w.Due)
}

// TestSweepQueuesRetriesWhenDueWithoutWalking: with the walk of every
// endpoint not due for an hour, an endpoint with a delivery due gets a
// dispatch job only once the retry time its last run left is due, and that
// time is cleared as the job is queued.
func TestSweepQueuesRetriesWhenDueWithoutWalking(t *testing.T) {
	b := setupSweep(t)
	b.sweeper = b.newSweeper(SweeperConfig{Interval: time.Nanosecond, WalkInterval: time.Hour})
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
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "available"), "no walk, no retry time: nothing")

	_, err = b.f.Store.Pool().Exec(b.ctx, `UPDATE endpoints SET retry_due_at = now() + interval '1 hour' WHERE id = $1`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "available"), "the retry is not due yet")
	require.NotNil(t, retryDue())

	_, err = b.f.Store.Pool().Exec(b.ctx, `UPDATE endpoints SET retry_due_at = now() - interval '1 second' WHERE id = $1`, b.endpointID)
	require.NoError(t, err)
	b.sweep()
	require.Equal(t, []string{"fanout", "dispatch"}, jobstest.Kinds(b.jobs(), "available"))
	require.Nil(t, retryDue(), "taken")
}

// TestSweepTakesTurns: across processes a sweep runs once per interval.
func TestSweepTakesTurns(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := context.Background()
	turns := []sweepTurn{{"dispatch", time.Hour}, {"backlog", time.Hour}}
	first, err := claimSweeps(ctx, f.Store, turns)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"dispatch": true, "backlog": true}, first)
	second, err := claimSweeps(ctx, f.Store, append(turns, sweepTurn{"dispatch-walk", time.Hour}))
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"dispatch-walk": true}, second, "the first two turns are taken for the next hour")
}

// TestSweepReplacesDeadReplayJobs: a bulk replay job whose run died is
// replaced like a fan-out's, with the same request.
func TestSweepReplacesDeadReplayJobs(t *testing.T) {
	b := setupSweep(t)
	requestID := uuid.New()
	require.NoError(t, b.f.Store.InTx(b.ctx, func(tx store.Tx) error {
		return b.f.Jobs.Replay(b.ctx, tx, requestID, b.endpointID)
	}))
	js := b.jobs()
	replay := js[len(js)-1]
	require.Equal(t, "replay", replay.Kind)
	jobstest.FetchedBy(t, b.f.Store.Pool(), replay.ID, 10*time.Second)
	b.sweep()
	js = b.jobs()
	require.Equal(t, "cancelled", js[len(js)-2].State, "the dead run's job is given up")
	require.Equal(t, "replay", js[len(js)-1].Kind)
	require.Equal(t, "available", js[len(js)-1].State)
	require.JSONEq(t, replay.Args, js[len(js)-1].Args, "the replacement replays the same request")
}

// TestSweeperSweepsOnItsClock: started, the sweeper waits part of its
// interval on its clock, sweeps when that has passed and not before, and
// stops when told.
func TestSweeperSweepsOnItsClock(t *testing.T) {
	b := setupSweep(t)
	_, _, err := fanout.Events(b.ctx, b.f.Store, []uuid.UUID{b.eventID}, nil)
	require.NoError(t, err)
	clk := fakeclock.New(time.Now())
	b.sweeper = b.newSweeper(SweeperConfig{Interval: time.Minute, Clock: clk})
	b.sweeper.testSignals.swept.Init(t)

	require.NoError(t, b.sweeper.Start(b.ctx))
	wait := <-clk.Waits
	require.GreaterOrEqual(t, wait, 30*time.Second, "a little more often than the interval")
	require.LessOrEqual(t, wait, 45*time.Second)
	require.Equal(t, []string{"fanout"}, jobstest.Kinds(b.jobs(), "available"), "nothing swept before the wait ends")

	clk.Advance(wait)
	require.NoError(t, b.sweeper.testSignals.swept.WaitOrTimeout())
	require.Equal(t, []string{"fanout", "dispatch"}, jobstest.Kinds(b.jobs(), "available"), "the sweep queued the endpoint's dispatch")
	<-clk.Waits // waiting for the next turn
	b.sweeper.testSignals.swept.RequireEmpty()

	b.sweeper.Stop()
	b.sweeper.testSignals.swept.RequireEmpty()
}

// TestSweeperOff: with a negative interval, Start starts nothing.
func TestSweeperOff(t *testing.T) {
	b := setupSweep(t)
	clk := fakeclock.New(time.Now())
	b.sweeper = b.newSweeper(SweeperConfig{Interval: -1, Clock: clk})
	require.NoError(t, b.sweeper.Start(b.ctx))
	<-b.sweeper.Started()
	b.sweeper.Stop()
	require.Empty(t, clk.Waits, "it never waited for a turn")
}

func TestSweeperConfigResolve(t *testing.T) {
	t.Parallel()
	nudger := dispatch.NewNudger(nil, nil, dispatch.NudgerConfig{})
	c, err := SweeperConfig{Nudger: nudger}.Resolve()
	require.NoError(t, err)
	require.Equal(t, DefaultSweepInterval, c.Interval)
	require.Equal(t, 5*DefaultSweepInterval, c.WalkInterval)
	require.Equal(t, DefaultReplaceGrace, c.ReplaceGrace)
	require.Equal(t, jobs.SystemClock, c.Clock)
	_, err = SweeperConfig{}.Resolve()
	require.ErrorContains(t, err, "Nudger is required", "a nil Nudger is a programming error")
	_, err = SweeperConfig{Nudger: nudger, ReplaceGrace: -time.Second}.Resolve()
	require.ErrorContains(t, err, "ReplaceGrace must be positive")
	_, err = SweeperConfig{Interval: -1, ReplaceGrace: -time.Second}.Resolve()
	require.NoError(t, err, "off: the rest is not used")
}
