package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// Limits on events. A payload's own limit is Config.MaxPayload.
const (
	maxCoalesceKeyLength = 255
	maxOrderingKeyLength = 128 // characters
	maxIdempotencyKey    = 255
	maxBatchEvents       = 1000
	// eventBodyRoom is the room a single event's body leaves around the
	// payload for the other fields.
	eventBodyRoom = 4 << 10
	// maxBatchBody bounds a batch's body whatever its payloads: above
	// sluice.MaxPayloadCeiling, so that any payload fits in a batch.
	maxBatchBody = 32 << 20
)

// eventInput is one event as posted.
type eventInput struct {
	Type        *string         `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	CoalesceKey *string         `json:"coalesce_key"`
	Consumer    *string         `json:"consumer"`
	Broadcast   *bool           `json:"broadcast"`
	OrderingKey *string         `json:"ordering_key"`
}

type batchInput struct {
	Events []eventInput `json:"events"`
}

// toNewEvent validates in, naming fields under prefix. A payload over
// maxPayload bytes is a 413, not a validation failure.
func (in eventInput) toNewEvent(prefix string, maxPayload int, v *sluice.ValidationError) (sluice.NewEvent, error) {
	ev := sluice.NewEvent{Payload: in.Payload, CoalesceKey: in.CoalesceKey, Consumer: in.Consumer, OrderingKey: in.OrderingKey}
	if in.Broadcast != nil {
		ev.Broadcast = *in.Broadcast
	}
	switch {
	case in.Type == nil || *in.Type == "":
		v.Add(prefix+"type", "is required")
	case !control.ValidEventTypeName(*in.Type):
		v.Add(prefix+"type", "%s", control.EventTypeNameRule)
	case sluice.IsReservedType(*in.Type):
		v.Add(prefix+"type", "must not begin with %q: those types are Sluice's own", sluice.ReservedTypePrefix)
	default:
		ev.Type = *in.Type
	}
	if len(in.Payload) > maxPayload {
		return ev, payloadTooLarge(maxPayload)
	}
	validatePayload(in.Payload, prefix+"payload", v)
	if k := in.CoalesceKey; k != nil && (*k == "" || len(*k) > maxCoalesceKeyLength) {
		v.Add(prefix+"coalesce_key", "must be 1 to %d characters", maxCoalesceKeyLength)
	}
	if k := in.OrderingKey; k != nil && (*k == "" || utf8.RuneCountInString(*k) > maxOrderingKeyLength) {
		v.Add(prefix+"ordering_key", "must be 1 to %d characters", maxOrderingKeyLength)
	}
	switch c := in.Consumer; {
	case c == nil:
	case !sluice.ValidConsumerUID(*c):
		v.Add(prefix+"consumer", sluice.ConsumerUIDRule)
	case ev.Broadcast:
		v.Add(prefix+"broadcast", "must not be true for an event addressed to a consumer")
	}
	return ev, nil
}

// validatePayload is control.CheckPayload: its text was otherwise checked
// with the whole body.
func validatePayload(p json.RawMessage, field string, v *sluice.ValidationError) {
	control.CheckPayload(p, field, v)
}

func payloadTooLarge(maxPayload int) *Problem {
	return &Problem{Type: typeTooLarge, Title: "Payload too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("an event payload may be at most %d bytes (SLUICE_MAX_PAYLOAD)", maxPayload)}
}
