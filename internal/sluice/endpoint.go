package sluice

import (
	"time"

	"github.com/google/uuid"
)

// Endpoint statuses, as the API reports them.
const (
	EndpointActive      = "active"
	EndpointThrottled   = "throttled"
	EndpointCircuitOpen = "circuit_open"
	EndpointDisabled    = "disabled"
	// EndpointUnverified: its verification is "challenge" and it has not
	// answered one yet; its deliveries queue and nothing is sent.
	EndpointUnverified = "unverified"
)

// Circuit states.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half_open"
)

// Endpoint orderings (docs/architecture.md, "FIFO endpoints"):
// OrderingFIFO sends each line of an endpoint's deliveries (those of one
// ordering_key) one at a time, in the order their events were accepted.
const (
	OrderingNone = "none"
	OrderingFIFO = "fifo"
)

// How an endpoint's deliveries reach it (its delivery field): pushed to
// its URL, or read by its consumer from its poll URL (package poll). Fixed
// when the endpoint is created.
const (
	DeliveryPush = "push"
	DeliveryPoll = "poll"
)

// DefaultMaxInFlight is the number of concurrent requests an endpoint gets
// unless it asks for another.
const DefaultMaxInFlight = 10

// RateLimit paces deliveries to one endpoint with a token bucket: exactly one
// of PerSecond and PerMinute is set, and Burst is the bucket's capacity.
// Adaptive lets the rate fall on 429s, 503s and timeouts (Smart delivery,
// package flow), not below Min deliveries a second (0: the default).
type RateLimit struct {
	PerSecond int     `json:"per_second,omitempty"`
	PerMinute int     `json:"per_minute,omitempty"`
	Burst     int     `json:"burst"`
	Adaptive  bool    `json:"adaptive,omitempty"`
	Min       float64 `json:"min,omitempty"`
}

// MinPerSecond is the floor of an adaptive rate as set, 0 if not set.
func (r RateLimit) MinPerSecond() float64 { return r.Min }

// TokensPerSecond is the bucket's refill rate.
func (r RateLimit) TokensPerSecond() float64 {
	if r.PerSecond > 0 {
		return float64(r.PerSecond)
	}
	return float64(r.PerMinute) / 60
}

// Circuit is the state of an endpoint's circuit breaker.
type Circuit struct {
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	OpenedAt            *time.Time `json:"opened_at"`
	NextProbeAt         *time.Time `json:"next_probe_at"`
}

// BacklogAlert is when an endpoint's owner hears of its backlog
// (docs/receiving.md, "Backlog alerts"): Queued deliveries queued, or its
// oldest due delivery waiting OldestSeconds. Zero leaves a threshold
// unset; at least one is set.
type BacklogAlert struct {
	Queued        int `json:"queued,omitempty"`
	OldestSeconds int `json:"oldest_seconds,omitempty"`
}

// Endpoint is a receiver URL of a tenant, with its delivery settings and its
// current flow-control state.
type Endpoint struct {
	ID             uuid.UUID         `json:"id"`
	TenantID       uuid.UUID         `json:"-"`
	URL            string            `json:"url,omitempty"` // "" for a poll endpoint, which has none
	Delivery       string            `json:"delivery"`      // DeliveryPush or DeliveryPoll
	Description    string            `json:"description"`
	RateLimit      *RateLimit        `json:"rate_limit"`
	MaxInFlight    int               `json:"max_in_flight"`
	Headers        map[string]string `json:"headers"`
	Disabled       bool              `json:"disabled"`
	DisabledReason *string           `json:"disabled_reason"` // DisabledManual, DisabledGone or DisabledFailing; nil while enabled
	Consumer       *string           `json:"consumer"`
	BacklogAlert   *BacklogAlert     `json:"backlog_alert"`
	Ordering       string            `json:"ordering"` // OrderingNone or OrderingFIFO
	DeliveryOptions
	Status           string     `json:"status"`
	ThrottledUntil   *time.Time `json:"throttled_until"`
	ThrottleReason   *string    `json:"throttle_reason"`
	Circuit          Circuit    `json:"circuit"`
	QueuedDeliveries int64      `json:"queued_deliveries"`
	// EffectiveRate is what an adaptive rate limit allows now, in
	// deliveries a second, worked out from Slowdown; nil without one.
	EffectiveRate *float64 `json:"effective_rate"`
	// VerifiedAt is when it last answered a verification challenge; nil
	// before that. VerificationError is why the last challenge failed.
	VerifiedAt        *time.Time `json:"verified_at"`
	VerificationError *string    `json:"verification_error"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	// Slowdown is an adaptive rate limit's state as stored (the fields of
	// flow.Adaptive).
	Slowdown Slowdown `json:"-"`
}

// Slowdown is an adaptive rate's last slowdown: the Rate it slowed down
// to, in deliveries a second, At, from which it grows again, and its last
// halving; the zero value when it never slowed down.
type Slowdown struct {
	Rate     float64
	At       time.Time
	HalvedAt time.Time
}

// EndpointSettings are the fields of an endpoint a tenant chooses.
type EndpointSettings struct {
	URL         string
	Description string
	RateLimit   *RateLimit
	MaxInFlight int
	Headers     map[string]string
	Disabled    bool
	// BacklogAlert is nil without one.
	BacklogAlert *BacklogAlert
	// Ordering is OrderingNone or OrderingFIFO; "" is OrderingNone.
	Ordering string
	// Consumer is the uid of the consumer the endpoint belongs to; it is
	// chosen at creation and never changes.
	Consumer *string
	// Delivery is DeliveryPush or DeliveryPoll, chosen at creation.
	Delivery string
	Options  DeliveryOptions
}

// Settings returns the tenant-chosen fields of e.
func (e Endpoint) Settings() EndpointSettings {
	return EndpointSettings{
		URL:          e.URL,
		Description:  e.Description,
		RateLimit:    e.RateLimit,
		MaxInFlight:  e.MaxInFlight,
		Headers:      e.Headers,
		Disabled:     e.Disabled,
		BacklogAlert: e.BacklogAlert,
		Consumer:     e.Consumer,
		Ordering:     e.Ordering,
		Delivery:     e.Delivery,
		Options:      e.DeliveryOptions,
	}
}
