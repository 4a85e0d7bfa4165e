package sluice

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// TestEventType is the type of the event POST /v1/endpoints/{id}/test sends.
const TestEventType = "sluice.test"

// Event is something that happened at a tenant, posted to be delivered to
// every endpoint subscribed to its type. Its payload is frozen when posted.
type Event struct {
	ID          uuid.UUID       `json:"id"`
	TenantID    uuid.UUID       `json:"-"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	CoalesceKey *string         `json:"coalesce_key"`
	// Consumer is the uid of the consumer the event is addressed to.
	Consumer *string `json:"consumer"`
	// Broadcast events go to every matching endpoint, consumers' included.
	Broadcast bool `json:"broadcast"`
	// OrderingKey narrows a FIFO endpoint's order to the events that carry
	// the same key (docs/architecture.md, "FIFO endpoints").
	OrderingKey *string   `json:"ordering_key"`
	CreatedAt   time.Time `json:"created_at"`
	// TraceContext is the W3C trace context of the request that posted
	// it, when that request was traced (tracing.Carry); nil otherwise.
	TraceContext []byte `json:"-"`
}

// Bounds on an event's payload as posted (SLUICE_MAX_PAYLOAD): the
// default limit, and the highest a server may be given.
const (
	DefaultMaxPayload = 256 << 10
	MaxPayloadCeiling = 10 << 20
)

// NewEvent is an event as posted, before it is stored.
type NewEvent struct {
	Type           string
	Payload        json.RawMessage
	CoalesceKey    *string
	IdempotencyKey string
	Consumer       *string // a consumer's uid, or nil
	Broadcast      bool
	OrderingKey    *string // 1 to 128 characters, or nil
	TraceContext   []byte  // tracing.Carry of the posting request; nil when it is not traced
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed" // waiting to retry
	DeliveryDead      = "dead"
)

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	ID            uuid.UUID  `json:"id"`
	TenantID      uuid.UUID  `json:"-"`
	EventID       uuid.UUID  `json:"event_id"`
	EndpointID    uuid.UUID  `json:"endpoint_id"`
	EventType     string     `json:"event_type"`
	Status        string     `json:"status"`
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	ReplayedFrom  *uuid.UUID `json:"replayed_from"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// Attempt is one HTTP request of a delivery and what came of it.
type Attempt struct {
	At           time.Time `json:"at"`
	StatusCode   *int      `json:"status_code"`
	Error        *string   `json:"error"`
	LatencyMS    int       `json:"latency_ms"`
	ResponseBody *string   `json:"response_body"`
}

// DeliveryFilter selects deliveries in a list; nil fields do not filter.
type DeliveryFilter struct {
	EndpointID *uuid.UUID
	EventID    *uuid.UUID
	Status     *string
	// EventType is one type, or "prefix.*" for every type that starts
	// with "prefix.".
	EventType *string
	// Since and Until keep the deliveries created in [Since, Until).
	Since, Until *time.Time
	// Consumer keeps only the deliveries to that consumer's endpoints.
	Consumer *string
	// StatusCode keeps the deliveries whose last attempt was answered with
	// one status code ("404") or one in a range ("500-599").
	StatusCode *string
}

// EventFilter selects events in a list; nil fields do not filter.
type EventFilter struct {
	// Type is one type, or "prefix.*" as in DeliveryFilter.
	Type *string
	// Since and Until keep the events created in [Since, Until).
	Since, Until *time.Time
	// Filter is a payload filter in the subscriptions' language
	// (internal/filter), as JSON.
	Filter *string
}

// ReplayCountCap is the most deliveries a count of those a bulk replay
// would queue tells exactly: past it the count is ReplayCountCap+1, "more
// than ReplayCountCap", so that counting stays cheap however many there
// are. The replay itself queues all of them.
const ReplayCountCap = 1000

// ReplayFilter selects an endpoint's deliveries to replay in bulk.
type ReplayFilter struct {
	Status string
	Since  *time.Time
	Until  *time.Time
}

// WebhookBody is the Standard Webhooks body a delivery of an event carries,
// pushed or polled: {"id","type","timestamp","data"}, with data the
// payload exactly as posted.
func WebhookBody(eventID uuid.UUID, eventType string, createdAt time.Time, payload []byte) []byte {
	b := make([]byte, 0, len(payload)+160)
	b = append(b, `{"id":"`...)
	b = append(b, eventID.String()...)
	b = append(b, `","type":`...)
	b = strconv.AppendQuote(b, eventType)
	b = append(b, `,"timestamp":"`...)
	b = createdAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b = append(b, payload...)
	return append(b, '}')
}
