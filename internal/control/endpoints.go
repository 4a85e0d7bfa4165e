package control

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// EndpointInput is what a door asks of an endpoint's settings: at
// creation, those it chooses over the defaults; at an update, those it
// changes, every nil field kept as it is. The doors decode into it (JSON,
// a form); the rules are checked here, once.
type EndpointInput struct {
	URL         *string
	Description *string
	// MaxInFlight, Burst and the like: a door marks a value it could not
	// read as a whole number with -1, refused as out of range.
	MaxInFlight *int
	Headers     *map[string]string
	Disabled    *bool
	Ordering    *string
	// RateLimit replaces the rate limit; ClearRateLimit removes it.
	RateLimit      *RateLimitInput
	ClearRateLimit bool
	// BacklogAlert replaces the backlog alert (a threshold of 0 is unset,
	// one below 0 refused); ClearBacklogAlert removes it.
	BacklogAlert      *sluice.BacklogAlert
	ClearBacklogAlert bool
	// Consumer and Delivery are chosen at creation: an update may repeat
	// them, not change them. A portal caller's endpoint is its consumer's
	// whatever Consumer says.
	Consumer *string
	Delivery *string
	// Options are the delivery options the request names.
	Options OptionsInput
	// Subscription, when not nil, replaces the endpoint's subscriptions
	// with one to its patterns, or with none when it lists none: the
	// dashboard's form, which sets both at once.
	Subscription *SubscriptionInput
}

// RateLimitInput is a rate limit as asked for: exactly one of PerSecond
// and PerMinute, and a Burst that is by default the rate per second (1 for
// a rate per minute). Min, the floor of an adaptive rate in deliveries a
// second, must be more than 0.
type RateLimitInput struct {
	PerSecond *int
	PerMinute *int
	Burst     *int
	Adaptive  bool
	Min       *float64
}

// EndpointSecret is an endpoint with its signing secret and, for a poll
// endpoint, its poll URL, which carries the secret: what creating the
// endpoint and revealing or rotating its secret answer.
type EndpointSecret struct {
	Endpoint sluice.Endpoint
	Secret   string
	// PollURL is "" for a push endpoint.
	PollURL string
	// PublicKey is the current v1a public key (send.PublicKeyText) of an
	// endpoint that signs v1a; "" for others.
	PublicKey string
}

// CreateEndpoint creates an endpoint of the caller's scope with a new
// signing secret, and the subscription in.Subscription asks for. A portal
// caller's endpoint belongs to its consumer.
func (c *Control) CreateEndpoint(ctx context.Context, who Caller, in EndpointInput) (EndpointSecret, error) {
	var out EndpointSecret
	err := c.change(ctx, who, EndpointCreated, func(ctx context.Context, e *sluice.AuditEntry) error {
		set := sluice.EndpointSettings{MaxInFlight: sluice.DefaultMaxInFlight, Ordering: sluice.OrderingNone}
		v := &sluice.ValidationError{}
		subs, err := c.settle(ctx, who, in, &set, true, v)
		if err != nil {
			return err
		}
		secret := send.NewSecret()
		ep, err := c.store.CreateEndpoint(ctx, who.Tenant, set, secret)
		if errors.Is(err, sluice.ErrNotFound) && set.Consumer != nil {
			v.Add("consumer", "names no consumer of this tenant")
			return v
		}
		if err != nil {
			return err
		}
		if err := c.saveTLS(ctx, who.Tenant, ep.ID, in.Options, set.Options.TLS); err != nil {
			return err
		}
		if err := c.saveDestination(ctx, who.Tenant, ep.ID, nil, set.Options.Destination); err != nil {
			return err
		}
		if err := c.saveAuth(ctx, ep.ID, in.Options, nil, set.Options.Auth); err != nil {
			return err
		}
		if err := subs.set(ctx, c, who, ep.ID); err != nil {
			return err
		}
		if err := c.challenge(ctx, ep.ID, set.Options.Challenged()); err != nil {
			return err
		}
		public, err := c.setSigningKey(ctx, who, ep.ID, sluice.DeliveryOptions{}, set.Options)
		if err != nil {
			return err
		}
		e.ObjectID = object(ep.ID)
		out = EndpointSecret{Endpoint: c.current(ep), Secret: secret, PollURL: c.PollURL(ep, secret), PublicKey: public}
		return nil
	})
	return out, err
}

// settle applies in to set (a new endpoint's when create) and checks the
// result and the subscription in asks for, adding every failure to v: a
// portal caller's endpoint is its consumer's. It returns v when anything
// failed.
func (c *Control) settle(ctx context.Context, who Caller, in EndpointInput, set *sluice.EndpointSettings, create bool, v *sluice.ValidationError) (*subscriptions, error) {
	in.apply(set, create, v)
	if create && who.portal() {
		set.Consumer = who.Consumer
	}
	checkSettings(*set, c.cfg.AllowPrivateTargets, v)
	subs, err := c.subscriptionOf(ctx, who, in.Subscription, false, v)
	if err != nil {
		return nil, err
	}
	return subs, v.Err()
}

// current fills in what an endpoint is now that its stored state does not
// say by itself: the rate an adaptive rate limit allows now, a throttle
// only while it lasts, and the status those make.
func (c *Control) current(ep sluice.Endpoint) sluice.Endpoint {
	now := c.now()
	if rl := ep.RateLimit; rl != nil && rl.Adaptive {
		ep.EffectiveRate = new(flow.Adaptive(ep.Slowdown).Current(flow.LimitOf(*rl), now))
	}
	if ep.ThrottledUntil != nil && !now.Before(*ep.ThrottledUntil) {
		ep.ThrottledUntil, ep.ThrottleReason = nil, nil
	}
	switch {
	case ep.Disabled:
		ep.Status = sluice.EndpointDisabled
	case ep.DeliveryOptions.Challenged() && ep.VerifiedAt == nil:
		ep.Status = sluice.EndpointUnverified
	case ep.Circuit.State == sluice.CircuitOpen || ep.Circuit.State == sluice.CircuitHalfOpen:
		ep.Status = sluice.EndpointCircuitOpen
	case ep.ThrottledUntil != nil:
		ep.Status = sluice.EndpointThrottled
	default:
		ep.Status = sluice.EndpointActive
	}
	return ep
}

// UpdateEndpoint changes the settings in asks for of an endpoint of the
// caller's scope, and its subscriptions when in.Subscription says. It
// decides what follows from the change, in the same transaction:
// disabling or enabling by hand posts sluice.endpoint.disabled or
// .enabled; becoming FIFO puts the queued deliveries in their lines; a run
// parked until its next token (or a throttle or probe) looks again at
// once, so a new rate limit applies within a second on every worker; and
// enabling an endpoint starts a run, since the one that found it disabled
// ended without a successor.
func (c *Control) UpdateEndpoint(ctx context.Context, who Caller, id uuid.UUID, in EndpointInput) (sluice.Endpoint, error) {
	err := c.change(ctx, who, EndpointUpdated, func(ctx context.Context, e *sluice.AuditEntry) error {
		ep, err := c.Endpoint(ctx, who, id)
		if err != nil {
			return err
		}
		before := ep.Settings()
		set := before
		subs, err := c.settle(ctx, who, in, &set, false, &sluice.ValidationError{})
		if err != nil {
			return err
		}
		// A receiver proves the URL it answers at: a new one, or
		// verification turned on, asks it again.
		reverify := set.Options.Challenged() && (!before.Options.Challenged() || set.URL != before.URL)
		was, err := c.store.UpdateEndpoint(ctx, who.Tenant, id, set, reverify)
		if err != nil {
			return err
		}
		if err := c.saveTLS(ctx, who.Tenant, id, in.Options, set.Options.TLS); err != nil {
			return err
		}
		if err := c.saveDestination(ctx, who.Tenant, id, before.Options.Destination, set.Options.Destination); err != nil {
			return err
		}
		if err := c.saveAuth(ctx, id, in.Options, before.Options.Auth, set.Options.Auth); err != nil {
			return err
		}
		if err := c.challenge(ctx, id, reverify); err != nil {
			return err
		}
		if before.Options.Challenged() && !set.Options.Challenged() && ep.VerifiedAt == nil {
			if err := c.release(ctx, id); err != nil { // its deliveries waited for an answer
				return err
			}
		}
		if err := c.setOrdering(ctx, who.Tenant, id, set.Ordering); err != nil {
			return err
		}
		if _, err := c.setSigningKey(ctx, who, id, before.Options, set.Options); err != nil {
			return err
		}
		if err := c.afterUpdate(ctx, who, sluice.OpEndpoint{ID: id, URL: set.URL, Consumer: set.Consumer}, was, set.Disabled); err != nil {
			return err
		}
		if err := subs.set(ctx, c, who, id); err != nil {
			return err
		}
		e.ObjectID, e.Changed = object(id), changedFields(before, set, in.Subscription)
		return nil
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return c.Endpoint(ctx, who, id)
}

// setOrdering changes an endpoint's ordering, if it is another, in the
// change's transaction (UpdateEndpoint, which locked the row, leaves the
// ordering as it was). It locks the row FOR UPDATE first
// (LockEndpointOrdering), against fan-out's delivery inserts, so that an
// endpoint becoming FIFO then puts every queued delivery in its line
// (BackfillFIFO).
func (c *Control) setOrdering(ctx context.Context, tenant, id uuid.UUID, ordering string) error {
	key := dbq.EndpointOrderingParams{TenantID: tenant, ID: id}
	was, err := store.Read(ctx, c.store, (*dbq.Queries).EndpointOrdering, key)
	if err != nil {
		return fmt.Errorf("read ordering: %w", err)
	}
	if was == ordering {
		return nil
	}
	if err := store.Exec(ctx, c.store, (*dbq.Queries).LockEndpointOrdering, dbq.LockEndpointOrderingParams(key)); err != nil {
		return fmt.Errorf("lock endpoint: %w", err)
	}
	err = store.Exec(ctx, c.store, (*dbq.Queries).SetEndpointOrdering, dbq.SetEndpointOrderingParams{TenantID: tenant, ID: id, Ordering: ordering})
	if err != nil {
		return fmt.Errorf("set ordering: %w", err)
	}
	if ordering != sluice.OrderingFIFO {
		return nil
	}
	if err := store.Exec(ctx, c.store, (*dbq.Queries).BackfillFIFO, id); err != nil {
		return fmt.Errorf("put queued deliveries in line: %w", err)
	}
	return nil
}

// afterUpdate posts the operational event of an endpoint disabled or
// enabled by hand, and unparks its dispatch or, when it is enabled, starts
// one, in the change's transaction.
func (c *Control) afterUpdate(ctx context.Context, who Caller, ep sluice.OpEndpoint, was store.EndpointUpdate, disabled bool) error {
	var evs []sluice.OpEvent
	switch {
	case disabled && !was.WasDisabled:
		evs = append(evs, ep.Event(sluice.OpEndpointDisabled, sluice.DisabledManual))
	case !disabled && was.WasDisabled:
		evs = append(evs, ep.Event(sluice.OpEndpointEnabled, sluice.ReasonManual))
	}
	enabled := was.WasDisabled && !disabled
	if len(evs) == 0 && was.ParkedJobID == nil && !enabled {
		return nil
	}
	return c.store.InTx(ctx, func(tx store.Tx) error {
		if err := notify.PostOpEvents(ctx, tx, c.nudger, c.now(), who.Tenant, evs); err != nil {
			return fmt.Errorf("post operational events: %w", err)
		}
		if was.ParkedJobID == nil && !enabled {
			return nil
		}
		if err := c.nudger.Unpark(ctx, tx.Tx, ep.ID, was.ParkedJobID); err != nil {
			return fmt.Errorf("unpark: %w", err)
		}
		return nil
	})
}

// RevealEndpointSecret is the signing secret of an endpoint of the
// caller's scope. Revealing it is recorded as a change: whoever reads it
// can sign as Sluice.
func (c *Control) RevealEndpointSecret(ctx context.Context, who Caller, id uuid.UUID) (EndpointSecret, error) {
	var out EndpointSecret
	err := c.change(ctx, who, EndpointSecretRevealed, func(ctx context.Context, e *sluice.AuditEntry) error {
		ep, err := c.Endpoint(ctx, who, id)
		if err != nil {
			return err
		}
		secret, err := c.store.EndpointSecret(ctx, who.Tenant, id)
		if err != nil {
			return err
		}
		e.ObjectID = object(id)
		out = EndpointSecret{Endpoint: ep, Secret: secret, PollURL: c.PollURL(ep, secret)}
		if ep.SignsV1a() {
			public, err := store.Read(ctx, c.store, (*dbq.Queries).EndpointPublicKey, dbq.EndpointPublicKeyParams{TenantID: who.Tenant, ID: id})
			if err != nil {
				return fmt.Errorf("read endpoint public key: %w", err)
			}
			out.PublicKey = send.PublicKeyText(public)
		}
		return nil
	})
	return out, err
}

// RotateEndpointSecret gives an endpoint of the caller's scope a new
// signing secret, and a new key pair when it signs v1a; the current ones
// keep signing beside them for SecretGrace, the public key staying in the
// JWKS as long. A poll endpoint's URL changes with it: a poll reader of
// this process forgets the old one at once, others hear of it.
func (c *Control) RotateEndpointSecret(ctx context.Context, who Caller, id uuid.UUID) (EndpointSecret, error) {
	var out EndpointSecret
	err := c.change(ctx, who, EndpointSecretRotated, func(ctx context.Context, e *sluice.AuditEntry) error {
		ep, err := c.Endpoint(ctx, who, id)
		if err != nil {
			return err
		}
		secret := send.NewSecret()
		if err := c.store.RotateEndpointSecret(ctx, who.Tenant, id, secret, c.now().Add(SecretGrace)); err != nil {
			return err
		}
		e.ObjectID = object(id)
		out = EndpointSecret{Endpoint: ep, Secret: secret, PollURL: c.PollURL(ep, secret)}
		if ep.SignsV1a() {
			key := send.NewSigningKey()
			if err := c.store.RotateEndpointSigningKey(ctx, who.Tenant, id, key); err != nil {
				return err
			}
			out.PublicKey = send.PublicKeyText(key.Public().(ed25519.PublicKey))
		}
		return nil
	})
	if err != nil {
		return EndpointSecret{}, err
	}
	c.forget(id)
	return out, nil
}

// TestEndpoint sends a sluice.test event to an endpoint of the caller's
// scope alone, addressed to its consumer, and queues its dispatch.
func (c *Control) TestEndpoint(ctx context.Context, who Caller, id uuid.UUID) (sluice.Event, error) {
	var ev sluice.Event
	err := c.change(ctx, who, EndpointTested, func(ctx context.Context, e *sluice.AuditEntry) error {
		ep, err := c.Endpoint(ctx, who, id)
		if err != nil {
			return err
		}
		payload, err := json.Marshal(map[string]string{
			"message":     "This is a test event from Sluice.",
			"endpoint_id": id.String(),
		})
		if err != nil {
			return fmt.Errorf("encode test payload: %w", err)
		}
		if ev, err = c.testEvent(ctx, ep, payload); err != nil {
			return err
		}
		e.ObjectID = object(id)
		return nil
	})
	return ev, err
}

// testEvent stores a sluice.test event and its one delivery, to ep alone,
// and queues ep's dispatch. The event is addressed to ep's consumer, so it
// shows among that consumer's events and nowhere else.
func (c *Control) testEvent(ctx context.Context, ep sluice.Endpoint, payload []byte) (sluice.Event, error) {
	var ev sluice.Event
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		var err error
		ev, err = tx.InsertEvent(ctx, ep.TenantID, sluice.NewEvent{Type: sluice.TestEventType, Payload: payload, Consumer: ep.Consumer})
		if err != nil {
			return err
		}
		_, err = tx.Q.InsertDeliveries(ctx, dbq.InsertDeliveriesParams{
			TenantID: ep.TenantID, Ids: []uuid.UUID{store.NewID()}, EventIds: []uuid.UUID{ev.ID},
			EndpointIds: []uuid.UUID{ep.ID}, EventTypes: []string{ev.Type}, CoalesceKeys: []string{""},
		})
		if err != nil {
			return fmt.Errorf("insert test delivery: %w", store.NotFound(err)) // the endpoint was deleted meanwhile
		}
		return c.nudger.Dispatch(ctx, tx.Tx, []uuid.UUID{ep.ID})
	})
	return ev, err
}

// CloseCircuit closes the circuit of an endpoint of the caller's scope by
// hand (dispatch.CloseCircuit): its queued deliveries go at its rate.
func (c *Control) CloseCircuit(ctx context.Context, who Caller, id uuid.UUID) (sluice.Endpoint, error) {
	err := c.change(ctx, who, EndpointCircuitClosed, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Endpoint(ctx, who, id); err != nil {
			return err
		}
		if err := dispatch.CloseCircuit(ctx, c.store, c.nudger, who.Tenant, id); err != nil {
			return fmt.Errorf("close circuit: %w", err)
		}
		e.ObjectID = object(id)
		return nil
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return c.Endpoint(ctx, who, id)
}

// LiftThrottle ends the throttle window of an endpoint of the caller's
// scope by hand (dispatch.LiftThrottle): its queued deliveries go at its
// rate now, not when the window would have closed.
func (c *Control) LiftThrottle(ctx context.Context, who Caller, id uuid.UUID) (sluice.Endpoint, error) {
	err := c.change(ctx, who, EndpointThrottleLifted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Endpoint(ctx, who, id); err != nil {
			return err
		}
		if err := dispatch.LiftThrottle(ctx, c.store, c.nudger, who.Tenant, id); err != nil {
			return fmt.Errorf("lift throttle: %w", err)
		}
		e.ObjectID = object(id)
		return nil
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return c.Endpoint(ctx, who, id)
}

// PollURL is the URL a poll endpoint is read from under secret, "" for a
// push endpoint.
func (c *Control) PollURL(ep sluice.Endpoint, secret string) string {
	if ep.Delivery != sluice.DeliveryPoll {
		return ""
	}
	return poll.URL(c.cfg.PublicURL, ep.ID, secret)
}

// apply writes the fields in sets over set, checking those the settings
// rules (checkSettings) do not: the rate limit's, and that an update
// leaves the consumer and the delivery as they are.
func (in EndpointInput) apply(set *sluice.EndpointSettings, creating bool, v *sluice.ValidationError) {
	switch {
	case in.Consumer == nil:
	case creating && !sluice.ValidConsumerUID(*in.Consumer):
		v.Add("consumer", sluice.ConsumerUIDRule)
	case creating:
		set.Consumer = in.Consumer
	case set.Consumer == nil || *set.Consumer != *in.Consumer:
		v.Add("consumer", "is chosen when the endpoint is created and cannot change")
	}
	switch {
	case in.Delivery == nil:
	case creating:
		set.Delivery = *in.Delivery
	case *in.Delivery != set.Delivery:
		v.Add("delivery", "is chosen when the endpoint is created and cannot change")
	}
	if set.Delivery == "" {
		set.Delivery = sluice.DeliveryPush
	}
	if in.URL != nil {
		set.URL = strings.TrimSpace(*in.URL)
	}
	if in.Description != nil {
		set.Description = *in.Description
	}
	switch {
	case in.ClearRateLimit:
		set.RateLimit = nil
	case in.RateLimit != nil:
		set.RateLimit = in.RateLimit.rateLimit(v)
	}
	if in.MaxInFlight != nil {
		set.MaxInFlight = *in.MaxInFlight
	}
	if in.Headers != nil {
		set.Headers = *in.Headers
	}
	if set.Headers == nil {
		set.Headers = map[string]string{}
	}
	if in.Disabled != nil {
		set.Disabled = *in.Disabled
	}
	switch {
	case in.ClearBacklogAlert:
		set.BacklogAlert = nil
	case in.BacklogAlert != nil:
		set.BacklogAlert = in.BacklogAlert
	}
	if in.Ordering != nil {
		set.Ordering = *in.Ordering
	}
	if set.Ordering == "" {
		set.Ordering = sluice.OrderingNone
	}
	applyOptions(&set.Options, in.Options, v)
	// url and destination are exclusive: a request that sets one and
	// leaves the other out turns the endpoint into that kind.
	if raw, named := in.Options["destination"]; named && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) && in.URL == nil {
		set.URL = ""
	} else if !named && set.URL != "" {
		set.Options.Destination = nil
	}
}

// rateLimit checks in and returns the rate limit it asks for; nil when
// it names neither rate, or both.
func (in RateLimitInput) rateLimit(v *sluice.ValidationError) *sluice.RateLimit {
	rl := &sluice.RateLimit{}
	switch {
	case (in.PerSecond == nil) == (in.PerMinute == nil):
		v.Add("rate_limit", "must set exactly one of per_second and per_minute")
		return nil
	case in.PerSecond != nil:
		rl.PerSecond, rl.Burst = *in.PerSecond, *in.PerSecond
		checkRate("per_second", rl.PerSecond, v)
	default:
		rl.PerMinute, rl.Burst = *in.PerMinute, 1
		checkRate("per_minute", rl.PerMinute, v)
	}
	if in.Burst != nil {
		rl.Burst = *in.Burst
		checkRate("burst", rl.Burst, v)
	}
	rl.Adaptive = in.Adaptive
	if in.Min != nil {
		rl.Min = *in.Min
		if rl.Min <= 0 {
			rl.Min = -1 // refused by checkAdaptive, not taken for unset
		}
	}
	checkAdaptive(*rl, v)
	return rl
}

// changedFields names, for the audit log, the settings an update gave a
// new value, and event_types (with filter, when it sets one) when it
// replaced the endpoint's subscriptions, which it does with new ones.
func changedFields(before, after sluice.EndpointSettings, sub *SubscriptionInput) []string {
	var out []string
	for name, same := range map[string]bool{
		"url":           before.URL == after.URL,
		"description":   before.Description == after.Description,
		"rate_limit":    reflect.DeepEqual(before.RateLimit, after.RateLimit),
		"max_in_flight": before.MaxInFlight == after.MaxInFlight,
		"headers":       maps.Equal(before.Headers, after.Headers),
		"disabled":      before.Disabled == after.Disabled,
		"backlog_alert": reflect.DeepEqual(before.BacklogAlert, after.BacklogAlert),
		"ordering":      before.Ordering == after.Ordering,
	} {
		if !same {
			out = append(out, name)
		}
	}
	out = append(out, changedOptions(before.Options, after.Options)...)
	if sub != nil {
		out = append(out, "event_types")
		if !noFilter(sub.Filter) {
			out = append(out, "filter")
		}
	}
	slices.Sort(out)
	return out
}

// DeleteEndpoint deletes an endpoint of the caller's scope, with its
// subscriptions and deliveries. A poll reader of this process forgets it
// at once; others hear of it from the deletion's notification.
func (c *Control) DeleteEndpoint(ctx context.Context, who Caller, id uuid.UUID) error {
	err := c.change(ctx, who, EndpointDeleted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Endpoint(ctx, who, id); err != nil {
			return err
		}
		e.ObjectID = object(id)
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteEndpoint, dbq.DeleteEndpointParams{TenantID: who.Tenant, ID: id}); err != nil {
			return fmt.Errorf("delete endpoint: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.forget(id)
	return nil
}
