package web

import (
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Navigation sections, for Chrome.Section.
const (
	SectionEndpoints  = "endpoints"
	SectionDead       = "dead"
	SectionEvents     = "events"
	SectionConsumers  = "consumers"
	SectionEventTypes = "event-types"
)

// Chrome is what every page's frame needs: who is signed in, the CSRF token
// its forms carry, and which nav section to highlight. The zero value is a
// signed-out frame without a nav bar.
type Chrome struct {
	TenantName string
	CSRF       string
	Section    string
	// Portal frames belong to a consumer's portal session; Consumer names
	// the consumer.
	Portal   bool
	Consumer string
	// ReadOnly sessions get no forms at all: a read-only portal link's, a
	// viewer's.
	ReadOnly bool
	// Member and Role name the member of a member's session.
	Member string
	Role   string
	// Members and AuditLog say whether the session may see those pages
	// (sluice.Role.Allows), and so their links.
	Members  bool
	AuditLog bool
}

// SignedIn reports whether the frame belongs to a session.
func (c Chrome) SignedIn() bool { return c.CSRF != "" }

// Who names the session: the tenant, and the consumer of a portal session
// or the member of a member's.
func (c Chrome) Who() string {
	switch {
	case c.Portal:
		return c.TenantName + " · " + c.Consumer
	case c.Member != "":
		return c.TenantName + " · " + c.Member
	}
	return c.TenantName
}

// CanSignOut reports whether the frame shows the sign-out form: every
// tenant's session has it, a viewer's too; a read-only portal link has no
// forms at all.
func (c Chrome) CanSignOut() bool { return c.SignedIn() && (!c.Portal || !c.ReadOnly) }

// Writable reports whether the page may show forms: a session that is not
// read-only.
func (c Chrome) Writable() bool { return c.SignedIn() && !c.ReadOnly }

// EndpointsView is the endpoints list.
type EndpointsView struct {
	Flash     string // the outcome of the last action, if any
	Endpoints []sluice.Endpoint
	Older     string // URL of the next page, "" on the last
}

// EndpointView is one endpoint with its delivery timeline.
type EndpointView struct {
	Endpoint sluice.Endpoint
	// RateChart is its effective rate over the last hour; nil unless its
	// rate limit is adaptive.
	RateChart *RateChart
	// Subscriptions are the patterns it is subscribed to.
	Subscriptions []string
	// SubscriptionFilters are its subscriptions' payload filters, each
	// once ("" for a subscription without one); none when none has one.
	SubscriptionFilters []string
	Flash               string // the outcome of the last action, if any
	Deliveries          []sluice.Delivery
	Filters             DeliveryFilters // of the deliveries
	Older               string
	Queued              *int64 // replays just queued, to flash
	// Replayable is how many dead deliveries "Replay all" would queue;
	// the action is offered only when it is not 0.
	Replayable int64
	// Replays marks the listed deliveries that have been replayed.
	Replays map[uuid.UUID]ReplayMark
	// Next is when each listed delivery will really be tried next.
	Next map[uuid.UUID]*NextAttempt
	// Charts are its attempts over the last hour and the last day.
	Charts []AttemptChart
	// Poll is how far a poll endpoint has been read; nil for a push one.
	Poll *PollState
}

// PollState is how far a poll endpoint has been read: the last position
// given to a delivery, the furthest its reader passed, and when.
type PollState struct {
	LastPosition int64
	ReadPosition int64
	ReadAt       *time.Time
}

// ReplayMark is the newest replay of a listed delivery.
type ReplayMark struct {
	ID     uuid.UUID
	Status string
}

// Queued reports whether the replay still waits to be sent, so the
// delivery cannot be replayed again yet.
func (m ReplayMark) Queued() bool {
	return m.Status == sluice.DeliveryPending || m.Status == sluice.DeliveryFailed
}

// DeliveryView is one delivery with its attempts.
type DeliveryView struct {
	Delivery sluice.Delivery
	Attempts []sluice.Attempt
	// Endpoint is the endpoint it was sent to; nil when it is gone.
	Endpoint *sluice.Endpoint
	// Next is when it will really be attempted next; nil when it is done.
	Next     *NextAttempt
	Replayed bool // it was just created by the Replay button
	Retried  bool // the Retry now button just made it due
}

// DeadView is the dead-letter list.
type DeadView struct {
	Deliveries []sluice.Delivery
	// Endpoints fill the filter's choices; EndpointsByID names the
	// endpoints of the listed deliveries.
	Endpoints     []sluice.Endpoint
	EndpointsByID map[uuid.UUID]sluice.Endpoint
	// Filter is the endpoint the list is filtered to, if any.
	Filter *uuid.UUID
	// Filters are the list's filters, the endpoint's included.
	Filters DeliveryFilters
	// ReplayTargets are the endpoints offered a "Replay all" form: the
	// filtered one, or those of the listed deliveries.
	ReplayTargets []uuid.UUID
	// Replayable is how many deliveries "Replay all" would queue per
	// target; targets with none are not offered the action.
	Replayable map[uuid.UUID]int64
	// Replays marks the listed deliveries that have been replayed.
	Replays map[uuid.UUID]ReplayMark
	// LastAttempts are the listed deliveries' last attempts: why each
	// failed.
	LastAttempts map[uuid.UUID]sluice.Attempt
	Older        string
	Queued       *int64 // replays just queued, to flash
}

// ReplayConfirmView is the confirmation step of "Replay all".
type ReplayConfirmView struct {
	Endpoint sluice.Endpoint
	Status   string // the deliveries replayed: dead or delivered
	From     string // the page to go back to: "endpoint" or "dead"
	Count    int64  // how many replays confirming would queue now
	Back     string // URL of the page the action came from
}

// EventsView is the events list.
type EventsView struct {
	Events []sluice.Event
	// FanOut is how many endpoints each event went to; none when absent.
	FanOut map[uuid.UUID]int64
	Type   string // the type filter, "" for all
	// Filter is the payload filter (JSON), "" for none; Since and Until
	// are DateTimeLocal values, "" for none.
	Filter, Since, Until string
	Older                string
}

// Set reports whether any filter is applied.
func (v EventsView) Set() bool {
	return v.Type != "" || v.Filter != "" || v.Since != "" || v.Until != ""
}

// EventView is one event with its payload and fan-out.
type EventView struct {
	Event         sluice.Event
	Payload       string // pretty-printed JSON
	Deliveries    []sluice.Delivery
	EndpointsByID map[uuid.UUID]sluice.Endpoint // the endpoints of the deliveries
	Replays       map[uuid.UUID]ReplayMark
	Next          map[uuid.UUID]*NextAttempt // when each delivery will really be tried next
}

// ErrorView is an error page.
type ErrorView struct {
	Status int
	Title  string
	Detail string
}
