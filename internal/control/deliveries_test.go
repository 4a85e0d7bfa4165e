package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// portalWithEndpoint creates a consumer of who's tenant and an endpoint of
// its, and returns the endpoint and a portal caller of the consumer.
func (b *testBundle) portalWithEndpoint(t *testing.T, who control.Caller, uid string) (sluice.Endpoint, control.Caller) {
	t.Helper()
	ctx := context.Background()
	_, _, err := b.f.Store.UpsertConsumer(ctx, who.Tenant, uid, sluice.ConsumerSettings{Name: uid})
	require.NoError(t, err)
	set := sluice.EndpointSettings{URL: "http://127.0.0.1:9/" + uid, MaxInFlight: sluice.DefaultMaxInFlight, Ordering: sluice.OrderingNone, Consumer: &uid}
	ep, err := b.f.Store.CreateEndpoint(ctx, who.Tenant, set, storetest.Secret)
	require.NoError(t, err)
	portal := control.Caller{Tenant: who.Tenant, Consumer: &uid, Role: sluice.RoleOwner,
		Actor: sluice.Actor{Type: sluice.ActorPortal, ID: uid, Name: uid}}
	return ep, portal
}

// settledDelivery sends a test event to the endpoint and settles its
// delivery with status (a failed one is due again in an hour); it returns
// the delivery, read back.
func (b *testBundle) settledDelivery(t *testing.T, who control.Caller, ep sluice.Endpoint, status string) sluice.Delivery {
	t.Helper()
	ctx := context.Background()
	ev, err := control.SendTestEvent(ctx, b.ctl, ep)
	require.NoError(t, err)
	if status != sluice.DeliveryPending {
		n := dispatchtest.Settle(t, b.f.Store, ep.ID, func(c dispatch.Claimed) dispatch.Outcome {
			code := 500
			if status == sluice.DeliveryDelivered {
				code = 200
			}
			return dispatch.Outcome{DeliveryID: c.ID, EventID: c.EventID, Status: status, Failed: status != sluice.DeliveryDelivered,
				NextAttemptAt: time.Now().Add(time.Hour), At: time.Now(), StatusCode: code, LatencyMS: 1}
		})
		require.Equal(t, 1, n)
	}
	_, ds, err := b.f.Store.GetEvent(ctx, who.Tenant, ev.ID)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, status, ds[0].Status)
	return ds[0]
}

// forgetDispatchJobs forgets every dispatch job queued so far, so that
// the next one seen is the change's.
func (b *testBundle) forgetDispatchJobs(t *testing.T) {
	t.Helper()
	jobstest.DeleteKind(t, b.f.Store.Pool(), "dispatch")
}

// dispatchJobQueued reports whether a dispatch job of the endpoint is
// queued.
func (b *testBundle) dispatchJobQueued(t *testing.T, endpointID uuid.UUID) bool {
	t.Helper()
	for _, j := range jobstest.All(t, b.f.Store.Pool()) {
		if j.Kind == "dispatch" && j.State == "available" && strings.Contains(j.Args, endpointID.String()) {
			return true
		}
	}
	return false
}

func TestRetryDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep := b.endpoint(t, b.owner)
	failed := b.settledDelivery(t, b.owner, ep, sluice.DeliveryFailed)
	b.forgetDispatchJobs(t)

	_, err := b.ctl.RetryDelivery(ctx, b.viewer, failed.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden, "a viewer changes nothing")
	_, err = b.ctl.RetryDelivery(ctx, b.other, failed.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's delivery")
	_, err = b.ctl.RetryDelivery(ctx, b.owner, uuid.New())
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, b.auditLog(t, b.owner), "a refused change records nothing")
	require.False(t, b.dispatchJobQueued(t, ep.ID))

	got, err := b.ctl.RetryDelivery(ctx, b.owner, failed.ID)
	require.NoError(t, err)
	require.Equal(t, failed.ID, got.ID, "no new delivery")
	require.WithinDuration(t, time.Now(), *got.NextAttemptAt, 5*time.Second, "due now")
	require.True(t, b.dispatchJobQueued(t, ep.ID), "the endpoint's dispatch is queued with it")
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, string(control.DeliveryRetried), log[0].Action)
	require.Equal(t, failed.ID.String(), *log[0].ObjectID)
	require.Equal(t, b.owner.Actor, log[0].Actor)

	dead := b.settledDelivery(t, b.owner, b.endpoint(t, b.owner), sluice.DeliveryDead)
	_, err = b.ctl.RetryDelivery(ctx, b.owner, dead.ID)
	require.ErrorIs(t, err, sluice.ErrConflict, "a dead delivery is replayed, not retried")
	require.Len(t, b.auditLog(t, b.owner), 1)
}

func TestReplayDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep := b.endpoint(t, b.owner)
	dead := b.settledDelivery(t, b.owner, ep, sluice.DeliveryDead)
	b.forgetDispatchJobs(t)

	_, err := b.ctl.ReplayDelivery(ctx, b.viewer, dead.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.ReplayDelivery(ctx, b.other, dead.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, b.auditLog(t, b.owner))
	require.False(t, b.dispatchJobQueued(t, ep.ID))

	again, err := b.ctl.ReplayDelivery(ctx, b.owner, dead.ID)
	require.NoError(t, err)
	require.NotEqual(t, dead.ID, again.ID, "a new delivery")
	require.Equal(t, dead.ID, *again.ReplayedFrom)
	require.Equal(t, sluice.DeliveryPending, again.Status)
	require.True(t, b.dispatchJobQueued(t, ep.ID))
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, string(control.DeliveryReplayed), log[0].Action)
	require.Equal(t, dead.ID.String(), *log[0].ObjectID, "the entry names the delivery replayed")
	_, fanned, err := b.ctl.Event(ctx, b.owner, dead.EventID)
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(fanned))
	for i, d := range fanned {
		ids[i] = d.ID
	}
	require.ElementsMatch(t, []uuid.UUID{dead.ID, again.ID}, ids, "the event lists its first delivery and its replay")

	_, err = b.ctl.ReplayDelivery(ctx, b.owner, dead.ID)
	require.ErrorIs(t, err, sluice.ErrConflict, "its event has a delivery queued")
	_, err = b.ctl.ReplayDelivery(ctx, b.owner, again.ID)
	require.ErrorIs(t, err, sluice.ErrConflict, "a queued delivery is retried, not replayed")
	require.Len(t, b.auditLog(t, b.owner), 1, "a failed change records nothing")
}

func TestReplayEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep := b.endpoint(t, b.owner)
	for range 3 {
		b.settledDelivery(t, b.owner, ep, sluice.DeliveryDead)
	}
	b.forgetDispatchJobs(t)
	dead := sluice.ReplayFilter{Status: sluice.DeliveryDead}

	var invalid *sluice.ValidationError
	_, err := b.ctl.ReplayEndpoint(ctx, b.owner, ep.ID, sluice.ReplayFilter{Status: sluice.DeliveryPending})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "status", invalid.Fields[0].Field)
	now := time.Now()
	_, err = b.ctl.CountReplayable(ctx, b.owner, ep.ID, sluice.ReplayFilter{Status: sluice.DeliveryDead, Since: &now, Until: &now})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "until", invalid.Fields[0].Field)

	_, err = b.ctl.ReplayEndpoint(ctx, b.viewer, ep.ID, dead)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.ReplayEndpoint(ctx, b.other, ep.ID, dead)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.CountReplayable(ctx, b.other, ep.ID, dead)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, b.auditLog(t, b.owner))

	n, err := b.ctl.CountReplayable(ctx, b.viewer, ep.ID, dead)
	require.NoError(t, err, "a viewer may read what a replay would queue")
	require.EqualValues(t, 3, n)

	n, err = b.ctl.ReplayEndpoint(ctx, b.owner, ep.ID, dead)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.True(t, b.dispatchJobQueued(t, ep.ID))
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, string(control.EndpointReplayed), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)

	n, err = b.ctl.CountReplayable(ctx, b.owner, ep.ID, dead)
	require.NoError(t, err)
	require.Zero(t, n, "the replays are queued")
}

// TestPortalCallerReachesItsConsumerOnly: a portal caller reads and
// changes its consumer's deliveries and events, and nothing of another
// consumer's, which is sluice.ErrNotFound as an id that does not exist.
func TestPortalCallerReachesItsConsumerOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	epMine, mine := b.portalWithEndpoint(t, b.owner, "c1")
	epTheirs, _ := b.portalWithEndpoint(t, b.owner, "c2")
	myDead := b.settledDelivery(t, b.owner, epMine, sluice.DeliveryDead)
	theirDead := b.settledDelivery(t, b.owner, epTheirs, sluice.DeliveryDead)
	theirFailed := b.settledDelivery(t, b.owner, epTheirs, sluice.DeliveryFailed)
	dead := sluice.ReplayFilter{Status: sluice.DeliveryDead}

	_, err := b.ctl.ReplayDelivery(ctx, mine, theirDead.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.RetryDelivery(ctx, mine, theirFailed.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.ReplayEndpoint(ctx, mine, epTheirs.ID, dead)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.CountReplayable(ctx, mine, epTheirs.ID, dead)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, b.auditLog(t, b.owner))

	_, _, err = b.ctl.Delivery(ctx, mine, theirDead.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, _, err = b.ctl.Event(ctx, mine, theirDead.EventID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.AttemptStats(ctx, mine, epTheirs.ID, time.Now().Add(-time.Hour), time.Now(), time.Minute)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.EffectiveRateChanges(ctx, mine, epTheirs.ID, time.Now().Add(-time.Hour))
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, _, err = b.ctl.SubscribedTo(ctx, mine, epTheirs.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.Deliveries(ctx, mine, sluice.DeliveryFilter{EndpointID: &epTheirs.ID}, sluice.PageParams{Limit: 10})
	require.ErrorIs(t, err, sluice.ErrNotFound)

	deliveries, err := b.ctl.Deliveries(ctx, mine, sluice.DeliveryFilter{}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{myDead.ID}, idsOfDeliveries(deliveries.Items))
	events, err := b.ctl.Events(ctx, mine, sluice.EventFilter{}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	require.Equal(t, myDead.EventID, events.Items[0].ID)
	all, err := b.ctl.Events(ctx, b.owner, sluice.EventFilter{}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, all.Items, 3, "the tenant's caller sees every event")
	eps, err := b.ctl.EndpointsByID(ctx, mine, []uuid.UUID{epMine.ID, epTheirs.ID}, []sluice.Endpoint{epTheirs})
	require.NoError(t, err)
	require.Len(t, eps, 1)
	require.Contains(t, eps, epMine.ID)
	last, err := b.ctl.LastAttempts(ctx, mine, deliveries.Items)
	require.NoError(t, err)
	require.Contains(t, last, myDead.ID)
	replays, err := b.ctl.NewestReplays(ctx, mine, deliveries.Items)
	require.NoError(t, err)
	require.Empty(t, replays)

	readOnly := mine
	readOnly.ReadOnly = true
	_, err = b.ctl.ReplayDelivery(ctx, readOnly, myDead.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden, "a read-only link changes nothing")

	again, err := b.ctl.ReplayDelivery(ctx, mine, myDead.ID)
	require.NoError(t, err)
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, mine.Actor, log[0].Actor, "recorded as the portal's consumer")
	replays, err = b.ctl.NewestReplays(ctx, mine, []sluice.Delivery{myDead})
	require.NoError(t, err)
	require.Equal(t, again.ID, replays[myDead.ID].ID)
}

func TestDeliveriesStatusFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep := b.endpoint(t, b.owner)
	b.settledDelivery(t, b.owner, ep, sluice.DeliveryDead)

	bogus := "bogus"
	_, err := b.ctl.Deliveries(ctx, b.owner, sluice.DeliveryFilter{Status: &bogus}, sluice.PageParams{Limit: 10})
	var invalid *sluice.ValidationError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "status", invalid.Fields[0].Field)

	for status, want := range map[string]int{sluice.DeliveryDead: 1, sluice.DeliveryPending: 0} {
		page, err := b.ctl.Deliveries(ctx, b.owner, sluice.DeliveryFilter{Status: &status}, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, want, status)
	}
}

func idsOfDeliveries(ds []sluice.Delivery) []uuid.UUID {
	out := make([]uuid.UUID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
