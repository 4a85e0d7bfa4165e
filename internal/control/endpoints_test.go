package control_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// nudges records what the control layer asks of its Nudger, and passes
// it on to the fixture's job queue.
type nudges struct {
	dispatch.TxNudger
	mu         sync.Mutex
	dispatched []uuid.UUID
	unparked   []uuid.UUID
	verified   []uuid.UUID
	fanOuts    int
}

func (n *nudges) Verify(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	n.mu.Lock()
	n.verified = append(n.verified, id)
	n.mu.Unlock()
	return n.TxNudger.Verify(ctx, tx, id)
}

func (n *nudges) Dispatch(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	n.mu.Lock()
	n.dispatched = append(n.dispatched, ids...)
	n.mu.Unlock()
	return n.TxNudger.Dispatch(ctx, tx, ids)
}

func (n *nudges) Unpark(ctx context.Context, tx pgx.Tx, id uuid.UUID, parked *int64) error {
	n.mu.Lock()
	n.unparked = append(n.unparked, id)
	n.mu.Unlock()
	return n.TxNudger.Unpark(ctx, tx, id, parked)
}

func (n *nudges) FanOut(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	n.mu.Lock()
	n.fanOuts++
	n.mu.Unlock()
	return n.TxNudger.FanOut(ctx, tx, ids)
}

// forgets records the endpoints a poll reader is told to forget.
type forgets struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (f *forgets) Forget(id uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, id)
}

// endpointBundle is setup's bundle with a Control whose Nudger and poll
// reader record what they are asked, and a portal caller of consumer c1.
type endpointBundle struct {
	*testBundle
	ctl    *control.Control
	nudges *nudges
	forgot *forgets
	portal control.Caller
}

func setupEndpoints(t *testing.T) *endpointBundle {
	t.Helper()
	b := &endpointBundle{testBundle: setup(t), forgot: &forgets{}}
	b.nudges = &nudges{TxNudger: b.f.Jobs}
	b.ctl = control.New(control.Config{Store: b.f.Store, Nudger: b.nudges,
		AllowPrivateTargets: true, PublicURL: "https://sluice.test/"})
	control.WatchForget(b.ctl, b.forgot.Forget)
	for _, uid := range []string{"c1", "c2"} {
		_, _, err := b.f.Store.UpsertConsumer(context.Background(), b.f.TenantA.ID, uid, sluice.ConsumerSettings{Name: uid})
		require.NoError(t, err)
	}
	uid := "c1"
	b.portal = control.Caller{Tenant: b.f.TenantA.ID, Consumer: &uid, Role: sluice.RoleOwner,
		Actor: sluice.Actor{Type: sluice.ActorPortal, ID: uid, Name: uid}}
	return b
}

func (b *endpointBundle) create(t *testing.T, who control.Caller, in control.EndpointInput) control.EndpointSecret {
	t.Helper()
	if in.URL == nil && in.Delivery == nil {
		in.URL = new("http://127.0.0.1:9/hook")
	}
	ep, err := b.ctl.CreateEndpoint(context.Background(), who, in)
	require.NoError(t, err)
	return ep
}

// fields are the fields a *sluice.ValidationError names.
func fields(t *testing.T, err error) []string {
	t.Helper()
	var v *sluice.ValidationError
	require.ErrorAs(t, err, &v)
	var out []string
	for _, f := range v.Fields {
		out = append(out, f.Field)
	}
	return out
}

// events are the types of the tenant's events, newest first.
func (b *endpointBundle) events(t *testing.T) []string {
	t.Helper()
	page, err := b.f.Store.ListEvents(context.Background(), b.f.TenantA.ID, nil, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
	require.NoError(t, err)
	var out []string
	for _, ev := range page.Items {
		out = append(out, ev.Type)
	}
	return out
}

func TestCreateEndpoint(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()

	_, err := b.ctl.CreateEndpoint(ctx, b.viewer, control.EndpointInput{URL: new("https://a.example/x")})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{
		URL: new("ftp://a.example"), MaxInFlight: new(0),
		RateLimit: &control.RateLimitInput{PerSecond: new(-1)}, Consumer: new("no such"),
	})
	require.Equal(t, []string{"consumer", "rate_limit.per_second", "url", "max_in_flight"}, fields(t, err))
	_, err = b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{URL: new("https://a.example/x"), Consumer: new("c9")})
	require.Equal(t, []string{"consumer"}, fields(t, err), "a consumer the tenant does not have")
	require.Empty(t, b.auditLog(t, b.owner), "a refused change records nothing")

	ep := b.create(t, b.owner, control.EndpointInput{Description: new("orders"),
		RateLimit: &control.RateLimitInput{PerMinute: new(30)}})
	require.True(t, strings.HasPrefix(ep.Secret, "whsec_"))
	require.Empty(t, ep.PollURL, "a push endpoint has none")
	require.Equal(t, sluice.DefaultMaxInFlight, ep.Endpoint.MaxInFlight)
	require.Equal(t, &sluice.RateLimit{PerMinute: 30, Burst: 1}, ep.Endpoint.RateLimit)
	require.Equal(t, sluice.OrderingNone, ep.Endpoint.Ordering)
	require.Nil(t, ep.Endpoint.Consumer)
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 1)
	require.Equal(t, string(control.EndpointCreated), log[0].Action)
	require.Equal(t, ep.Endpoint.ID.String(), *log[0].ObjectID)
	require.Nil(t, log[0].Changed)

	poll := b.create(t, b.owner, control.EndpointInput{Delivery: new(sluice.DeliveryPoll)})
	require.Equal(t, b.ctl.PollURL(poll.Endpoint, poll.Secret), poll.PollURL)
	require.True(t, strings.HasPrefix(poll.PollURL, "https://sluice.test/poll/"), poll.PollURL)

	// A portal caller's endpoint is its consumer's, subscribed from the
	// catalogue only.
	_, err = b.ctl.CreateEndpoint(ctx, b.portal, control.EndpointInput{URL: new("https://c1.example/x"),
		Subscription: &control.SubscriptionInput{Patterns: []string{"secret.*"}}})
	require.Equal(t, []string{"event_types"}, fields(t, err))
	mine := b.create(t, b.portal, control.EndpointInput{Consumer: new("c2"),
		Subscription: &control.SubscriptionInput{Listed: []string{"*"}, Filter: json.RawMessage(`{"tier":"gold"}`)}})
	require.Equal(t, "c1", *mine.Endpoint.Consumer)
	subs, err := b.ctl.Subscriptions(ctx, b.portal, &mine.Endpoint.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, subs.Items, 1)
	require.Equal(t, []string{"*"}, subs.Items[0].EventTypes)
	require.JSONEq(t, `{"tier":"gold"}`, string(subs.Items[0].Filter))
}

func TestUpdateEndpoint(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint

	disable := control.EndpointInput{Disabled: new(true)}
	_, err := b.ctl.UpdateEndpoint(ctx, b.viewer, ep.ID, disable)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.UpdateEndpoint(ctx, b.other, ep.ID, disable)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's endpoint")
	_, err = b.ctl.UpdateEndpoint(ctx, b.portal, ep.ID, disable)
	require.ErrorIs(t, err, sluice.ErrNotFound, "not the consumer's endpoint")
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{
		URL: new(""), Consumer: new("c1"), Delivery: new(sluice.DeliveryPoll), Ordering: new("random"),
	})
	require.Equal(t, []string{"consumer", "delivery", "url", "ordering"}, fields(t, err))

	// Disabling posts its operational event; enabling posts one and
	// starts a run, the one that found it disabled having ended.
	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, disable)
	require.NoError(t, err)
	require.True(t, got.Disabled)
	require.Equal(t, []string{sluice.OpEndpointDisabled}, b.events(t))
	require.Empty(t, b.nudges.unparked, "nothing parked, nothing to enable")
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Disabled: new(false), Description: new("back")})
	require.NoError(t, err)
	require.Equal(t, []string{sluice.OpEndpointEnabled, sluice.OpEndpointDisabled}, b.events(t))
	require.Equal(t, []uuid.UUID{ep.ID}, b.nudges.unparked)
	require.Equal(t, 2, b.nudges.fanOuts, "each operational event is fanned out")

	log := b.auditLog(t, b.owner)
	require.Len(t, log, 3)
	require.Equal(t, string(control.EndpointUpdated), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)
	require.Equal(t, []string{"description", "disabled"}, log[0].Changed)
	require.Equal(t, []string{"disabled"}, log[1].Changed)

	// A PATCH keeps what it does not name; null-like clears remove.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{
		RateLimit: &control.RateLimitInput{PerSecond: new(5)}, BacklogAlert: &sluice.BacklogAlert{Queued: 10},
	})
	require.NoError(t, err)
	require.Equal(t, "back", got.Description)
	require.Equal(t, &sluice.RateLimit{PerSecond: 5, Burst: 5}, got.RateLimit)
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{ClearRateLimit: true, ClearBacklogAlert: true})
	require.NoError(t, err)
	require.Nil(t, got.RateLimit)
	require.Nil(t, got.BacklogAlert)
	require.Equal(t, []string{"backlog_alert", "rate_limit"}, b.auditLog(t, b.owner)[0].Changed)

	// The dashboard's form replaces the subscriptions with its own.
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{
		Subscription: &control.SubscriptionInput{Listed: []string{"no.such.type"}}})
	require.Equal(t, []string{"event_types"}, fields(t, err))
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{
		Subscription: &control.SubscriptionInput{Patterns: []string{"order.*"}, Filter: json.RawMessage(`{"total":{"$gt":true}}`)}})
	require.Equal(t, []string{"filter.total.$gt"}, fields(t, err))
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{
		Subscription: &control.SubscriptionInput{Patterns: []string{"order.*"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"event_types"}, b.auditLog(t, b.owner)[0].Changed)
	subs, err := b.ctl.Subscriptions(ctx, b.owner, &ep.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, subs.Items, 1)
	require.Equal(t, []string{"order.*"}, subs.Items[0].EventTypes)
}

func TestEndpointBecomesFIFO(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint
	_, err := b.ctl.TestEndpoint(ctx, b.owner, ep.ID) // a delivery queued before
	require.NoError(t, err)

	got, err := b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Ordering: new(sluice.OrderingFIFO)})
	require.NoError(t, err)
	require.Equal(t, sluice.OrderingFIFO, got.Ordering)
	var lined int
	require.NoError(t, b.f.Store.Pool().QueryRow(ctx,
		`SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND fifo_position IS NOT NULL`, ep.ID).Scan(&lined))
	require.Equal(t, 1, lined, "the queued delivery is put in its line")
}

func TestEndpointSecret(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	created := b.create(t, b.owner, control.EndpointInput{Delivery: new(sluice.DeliveryPoll)})
	id := created.Endpoint.ID

	_, err := b.ctl.RevealEndpointSecret(ctx, b.other, id)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.RotateEndpointSecret(ctx, b.viewer, id)
	require.ErrorIs(t, err, sluice.ErrForbidden)

	shown, err := b.ctl.RevealEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	require.Equal(t, created.Secret, shown.Secret)
	require.Equal(t, created.PollURL, shown.PollURL)
	require.Equal(t, string(control.EndpointSecretRevealed), b.auditLog(t, b.owner)[0].Action, "revealing is recorded")

	rotated, err := b.ctl.RotateEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	require.NotEqual(t, created.Secret, rotated.Secret)
	require.NotEqual(t, created.PollURL, rotated.PollURL, "the poll URL changes with the secret")
	require.Equal(t, []uuid.UUID{id}, b.forgot.ids, "the poll reader forgets the old URL")
	shown, err = b.ctl.RevealEndpointSecret(ctx, b.owner, id)
	require.NoError(t, err)
	require.Equal(t, rotated.Secret, shown.Secret)
	var graceLeft bool
	require.NoError(t, b.f.Store.Pool().QueryRow(ctx,
		`SELECT previous_secret_expires_at > now() + interval '23 hours' FROM endpoints WHERE id = $1`, id).Scan(&graceLeft))
	require.True(t, graceLeft, "the old secret signs on for SecretGrace")
	log := b.auditLog(t, b.owner)
	require.Equal(t, string(control.EndpointSecretRotated), log[1].Action)
	require.Equal(t, id.String(), *log[1].ObjectID)
	for _, e := range log {
		require.NotContains(t, strings.Join(e.Changed, " "), "whsec_")
	}
}

func TestTestEndpoint(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.portal, control.EndpointInput{}).Endpoint
	theirs := b.create(t, b.owner, control.EndpointInput{}).Endpoint

	_, err := b.ctl.TestEndpoint(ctx, b.viewer, ep.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.TestEndpoint(ctx, b.portal, theirs.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)

	ev, err := b.ctl.TestEndpoint(ctx, b.portal, ep.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.TestEventType, ev.Type)
	require.Equal(t, "c1", *ev.Consumer, "addressed to the endpoint's consumer")
	require.Contains(t, string(ev.Payload), ep.ID.String())
	require.Equal(t, []uuid.UUID{ep.ID}, b.nudges.dispatched, "its dispatch is queued")
	_, deliveries, err := b.ctl.Event(ctx, b.portal, ev.ID)
	require.NoError(t, err)
	require.Len(t, deliveries, 1)
	require.Equal(t, ep.ID, deliveries[0].EndpointID)
	log := b.auditLog(t, b.owner)
	require.Equal(t, string(control.EndpointTested), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)
	require.Equal(t, b.portal.Actor, log[0].Actor)
}

func TestCloseCircuit(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint

	_, err := b.ctl.CloseCircuit(ctx, b.viewer, ep.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.CloseCircuit(ctx, b.other, ep.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// A closed circuit: nothing to tell, nothing to unpark.
	got, err := b.ctl.CloseCircuit(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.CircuitClosed, got.Circuit.State)
	require.Empty(t, b.events(t))

	// An open one is closed, told, and its run unparked.
	_, err = b.f.Store.Pool().Exec(ctx, `UPDATE endpoints SET circuit_state = 'open', consecutive_failures = 5,
		circuit_opened_at = now(), circuit_next_probe_at = now() + interval '1 hour' WHERE id = $1`, ep.ID)
	require.NoError(t, err)
	got, err = b.ctl.CloseCircuit(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.CircuitClosed, got.Circuit.State)
	require.Equal(t, []string{sluice.OpEndpointCircuitClosed}, b.events(t))
	require.Equal(t, []uuid.UUID{ep.ID}, b.nudges.unparked)
	log := b.auditLog(t, b.owner)
	require.Equal(t, string(control.EndpointCircuitClosed), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)
}

func TestLiftThrottle(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint

	_, err := b.ctl.LiftThrottle(ctx, b.viewer, ep.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.LiftThrottle(ctx, b.other, ep.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)

	// Not throttled: nothing to unpark.
	got, err := b.ctl.LiftThrottle(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Nil(t, got.ThrottledUntil)
	require.Empty(t, b.nudges.unparked)

	// Throttled for an hour: the window is gone, and its run unparked.
	_, err = b.f.Store.Pool().Exec(ctx, `INSERT INTO destination_throttle (endpoint_id, throttled_until, reason, consecutive_429s)
		VALUES ($1, now() + interval '1 hour', '429 Too Many Requests (3 in a row): backing off 1h', 3)`, ep.ID)
	require.NoError(t, err)
	before, err := b.ctl.Endpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.EndpointThrottled, before.Status)
	got, err = b.ctl.LiftThrottle(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Nil(t, got.ThrottledUntil)
	require.Nil(t, got.ThrottleReason)
	require.Equal(t, sluice.EndpointActive, got.Status)
	require.Equal(t, []uuid.UUID{ep.ID}, b.nudges.unparked)
	var rows int
	require.NoError(t, b.f.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM destination_throttle WHERE endpoint_id = $1`, ep.ID).Scan(&rows))
	require.Zero(t, rows, "the count of consecutive 429s goes with the window")
	log := b.auditLog(t, b.owner)
	require.Equal(t, string(control.EndpointThrottleLifted), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)
}
