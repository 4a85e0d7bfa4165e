package sluice

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ReservedTypePrefix begins the types of Sluice's own events: operational
// events and sluice.test. Tenants cannot post them, and the pattern "*"
// does not match them.
const ReservedTypePrefix = "sluice."

// IsReservedType reports whether eventType is one of Sluice's own, or
// looks like one to a receiver that compares types without case: its
// first characters equal ReservedTypePrefix under Unicode case folding
// ("Sluice.", "SLUICE.", and "ſluice." with a long s, which folds to s).
func IsReservedType(eventType string) bool {
	if strings.HasPrefix(eventType, ReservedTypePrefix) {
		return true
	}
	end, runes := 0, 0
	for end < len(eventType) && runes < len(ReservedTypePrefix) {
		_, size := utf8.DecodeRuneInString(eventType[end:])
		end += size
		runes++
	}
	return runes == len(ReservedTypePrefix) && strings.EqualFold(eventType[:end], ReservedTypePrefix)
}

// Operational event types: what Sluice posts into a tenant's stream when
// one of its endpoints changes state or a delivery goes dead.
const (
	OpEndpointDisabled      = "sluice.endpoint.disabled"
	OpEndpointEnabled       = "sluice.endpoint.enabled"
	OpEndpointCircuitOpened = "sluice.endpoint.circuit_opened"
	OpEndpointCircuitClosed = "sluice.endpoint.circuit_closed"
	OpEndpointBacklog       = "sluice.endpoint.backlog"
	OpCertificateExpiring   = "sluice.endpoint.certificate_expiring"
	OpDeliveryDead          = "sluice.delivery.dead"
)

// VerificationType is the type of the challenge Sluice sends an endpoint
// whose verification is VerifyChallenge: signed like a delivery, sent to
// that endpoint alone, and not an event of the tenant's stream.
const VerificationType = "sluice.endpoint.verification"

// Why an endpoint is disabled (Endpoint.DisabledReason).
const (
	DisabledManual  = "manual"  // PATCH {"disabled": true}, or created disabled
	DisabledGone    = "gone"    // its receiver answered 410 Gone
	DisabledFailing = "failing" // every attempt failed for SLUICE_DISABLE_AFTER while its circuit stayed open
)

// Reasons an operational event gives beside the disabled reasons.
const (
	ReasonFailures       = "failures"           // circuit_opened: consecutive failures
	ReasonProbeSucceeded = "probe_succeeded"    // circuit_closed: a probe was delivered
	ReasonManual         = "manual"             // circuit_closed by hand, endpoint enabled by hand
	ReasonAttemptsSpent  = "attempts_exhausted" // delivery.dead
	ReasonQueued         = "queued"             // endpoint.backlog: backlog_alert.queued reached
	ReasonOldest         = "oldest"             // endpoint.backlog: backlog_alert.oldest_seconds reached
	ReasonExpiring       = "expiring"           // endpoint.certificate_expiring: within CertificateExpiringWithin
)

// OpEvent is an operational event about one endpoint, as it is posted:
// addressed to the endpoint's consumer (if any), so it reaches that
// consumer's endpoints and the tenant's own, never another consumer's.
type OpEvent struct {
	Type    string
	Payload OpPayload
}

// OpPayload is an operational event's payload. The delivery fields are set
// for sluice.delivery.dead only; the circuit fields for circuit_opened; the
// backlog fields for endpoint.backlog.
type OpPayload struct {
	EndpointID  uuid.UUID  `json:"endpoint_id"`
	URL         string     `json:"url"`
	Consumer    *string    `json:"consumer"`
	Reason      string     `json:"reason"`
	LastError   string     `json:"last_error,omitempty"`
	Failures    int        `json:"failures,omitempty"`
	NextProbeAt *time.Time `json:"next_probe_at,omitempty"`
	DeliveryID  *uuid.UUID `json:"delivery_id,omitempty"`
	EventID     *uuid.UUID `json:"event_id,omitempty"`
	EventType   string     `json:"event_type,omitempty"`
	Attempts    int        `json:"attempts,omitempty"`
	LastStatus  *int       `json:"last_status,omitempty"`

	Queued           *int64        `json:"queued,omitempty"`             // deliveries queued when the alert went
	OldestDueSeconds *int64        `json:"oldest_due_seconds,omitempty"` // how long the oldest due one had waited
	BacklogAlert     *BacklogAlert `json:"backlog_alert,omitempty"`      // the thresholds

	CertificateSubject string     `json:"client_certificate_subject,omitempty"` // certificate_expiring: the certificate
	NotAfter           *time.Time `json:"not_after,omitempty"`                  // and when it expires
}

// EmailsOwner reports whether the endpoint's owner is also emailed about
// e: about a circuit opening or closing, Sluice disabling the endpoint,
// a backlog and a client certificate about to expire; not about what the
// owner did (disabling or enabling it) nor about each dead delivery.
func (e OpEvent) EmailsOwner() bool {
	switch e.Type {
	case OpEndpointCircuitOpened, OpEndpointCircuitClosed, OpEndpointBacklog, OpCertificateExpiring:
		return true
	case OpEndpointDisabled:
		return e.Payload.Reason != DisabledManual
	}
	return false
}

// OpEndpoint names the endpoint an operational event is about.
type OpEndpoint struct {
	ID       uuid.UUID
	URL      string
	Consumer *string
}

// Event returns an operational event of type typ about e for reason.
func (e OpEndpoint) Event(typ, reason string) OpEvent {
	return OpEvent{Type: typ, Payload: OpPayload{EndpointID: e.ID, URL: e.URL, Consumer: e.Consumer, Reason: reason}}
}

// OperationalEventTypes is the catalogue of Sluice's own event types, as
// GET /v1/event-types lists them ahead of the tenant's. Their ids are above
// every UUIDv7 and descend in this order, so a list ordered by id
// descending shows them first and its cursor can stop among them.
func OperationalEventTypes() []EventType {
	out := make([]EventType, len(opTypes))
	for i, t := range opTypes {
		id := uuid.Max
		id[15] -= byte(i)
		out[i] = EventType{
			ID: id, Name: t.name, Description: t.description,
			Example: json.RawMessage(t.example), Schema: json.RawMessage(opSchema(t.extra, t.reasons)),
		}
	}
	return out
}

// OperationalEventType returns the catalogue entry of a reserved type.
func OperationalEventType(name string) (EventType, bool) {
	for _, et := range OperationalEventTypes() {
		if et.Name == name {
			return et, true
		}
	}
	return EventType{}, false
}

type opType struct {
	name, description string
	reasons           []string
	extra             string // more properties of the schema, JSON object members
	example           string
}

var opTypes = []opType{
	{
		name:        OpEndpointDisabled,
		description: "Sent by Sluice: an endpoint was disabled, by hand (manual), because its receiver answered 410 Gone (gone), or because its attempts all failed for SLUICE_DISABLE_AFTER (failing). Its queued deliveries are kept.",
		reasons:     []string{DisabledManual, DisabledGone, DisabledFailing},
		extra:       `"last_error": {"type": "string"}`,
		example:     `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": null, "reason": "gone", "last_error": "status 410"}`,
	},
	{
		name:        OpEndpointEnabled,
		description: "Sent by Sluice: a disabled endpoint was enabled again; its queued deliveries drain at its rate limit.",
		reasons:     []string{ReasonManual},
		example:     `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": null, "reason": "manual"}`,
	},
	{
		name:        OpEndpointCircuitOpened,
		description: "Sent by Sluice: an endpoint's circuit opened after consecutive failures; deliveries keep queueing and one is tried at each probe.",
		reasons:     []string{ReasonFailures},
		extra:       `"last_error": {"type": "string"}, "failures": {"type": "integer"}, "next_probe_at": {"type": "string", "format": "date-time"}`,
		example:     `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": "acme", "reason": "failures", "last_error": "status 500", "failures": 5, "next_probe_at": "2026-01-02T15:04:05Z"}`,
	},
	{
		name:        OpEndpointCircuitClosed,
		description: "Sent by Sluice: an endpoint's circuit closed, after a probe succeeded or by hand; its backlog drains at its rate limit.",
		reasons:     []string{ReasonProbeSucceeded, ReasonManual},
		example:     `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": "acme", "reason": "probe_succeeded"}`,
	},
	{
		name:        OpEndpointBacklog,
		description: "Sent by Sluice: an endpoint's backlog reached its backlog_alert, by deliveries queued (queued) or by how long its oldest due delivery had waited (oldest). Sent again only after the backlog fell below half of every threshold.",
		reasons:     []string{ReasonQueued, ReasonOldest},
		extra: `"queued": {"type": "integer"}, "oldest_due_seconds": {"type": "integer"},` +
			` "backlog_alert": {"type": "object", "properties": {"queued": {"type": "integer"}, "oldest_seconds": {"type": "integer"}}}`,
		example: `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": "acme", "reason": "queued",` +
			` "queued": 1000, "oldest_due_seconds": 42, "backlog_alert": {"queued": 1000}}`,
	},
	{
		name:        OpDeliveryDead,
		description: "Sent by Sluice: a delivery's last attempt failed; it is kept for replay for SLUICE_DEAD_RETENTION. Never sent about a delivery of Sluice's own events.",
		reasons:     []string{ReasonAttemptsSpent},
		extra: `"last_error": {"type": "string"}, "delivery_id": {"type": "string", "format": "uuid"}, "event_id": {"type": "string", "format": "uuid"},` +
			` "event_type": {"type": "string"}, "attempts": {"type": "integer"}, "last_status": {"type": ["integer", "null"]}`,
		example: `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": null, "reason": "attempts_exhausted",` +
			` "last_error": "status 500", "delivery_id": "0193a5c8-7d3f-7000-8000-000000000001", "event_id": "0193a5c8-7d3f-7000-8000-000000000002",` +
			` "event_type": "order.created", "attempts": 10, "last_status": 500}`,
	},
	{
		name:        OpCertificateExpiring,
		description: "Sent by Sluice: the client certificate of an endpoint's tls option expires within 14 days (or has expired). Sent once per certificate; a new certificate is watched afresh.",
		reasons:     []string{ReasonExpiring},
		extra:       `"client_certificate_subject": {"type": "string"}, "not_after": {"type": "string", "format": "date-time"}`,
		example: `{"endpoint_id": "0193a5c8-7d3e-7c6a-9d7e-2f5b8a1c4e90", "url": "https://example.com/webhooks", "consumer": "acme", "reason": "expiring",` +
			` "client_certificate_subject": "CN=sluice-client,O=Example", "not_after": "2026-01-15T00:00:00Z"}`,
	},
}

// opSchema is the JSON Schema of an operational event's payload.
func opSchema(extra string, reasons []string) string {
	enum, _ := json.Marshal(reasons)
	props := `"endpoint_id": {"type": "string", "format": "uuid"}, "url": {"type": "string"}, "consumer": {"type": ["string", "null"]}, "reason": {"enum": ` + string(enum) + `}`
	if extra != "" {
		props += ", " + extra
	}
	return `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["endpoint_id", "url", "consumer", "reason"], "properties": {` + props + `}}`
}
