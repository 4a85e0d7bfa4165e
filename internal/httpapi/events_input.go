package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/textcheck"
)

// Limits on events.
const (
	maxEventTypeLength   = 128
	maxPayloadBytes      = 256 << 10
	maxCoalesceKeyLength = 255
	maxIdempotencyKey    = 255
	maxBatchEvents       = 1000
	// maxPayloadDepth bounds the nesting of arrays and objects in a
	// payload, far below what a parser's stack would notice.
	maxPayloadDepth = eventschema.MaxDepth
	// maxEventBody leaves room around the payload for the other fields.
	maxEventBody = maxPayloadBytes + 4<<10
	maxBatchBody = 32 << 20
)

var eventTypeRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// eventInput is one event as posted.
type eventInput struct {
	Type        *string         `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	CoalesceKey *string         `json:"coalesce_key"`
	Consumer    *string         `json:"consumer"`
	Broadcast   *bool           `json:"broadcast"`
}

type batchInput struct {
	Events []eventInput `json:"events"`
}

// toNewEvent validates in, naming fields under prefix. An oversize payload
// is a 413, not a validation failure.
func (in eventInput) toNewEvent(prefix string, v *sluice.ValidationError) (sluice.NewEvent, error) {
	ev := sluice.NewEvent{Payload: in.Payload, CoalesceKey: in.CoalesceKey, Consumer: in.Consumer}
	if in.Broadcast != nil {
		ev.Broadcast = *in.Broadcast
	}
	switch {
	case in.Type == nil || *in.Type == "":
		v.Add(prefix+"type", "is required")
	case len(*in.Type) > maxEventTypeLength || !eventTypeRE.MatchString(*in.Type):
		v.Add(prefix+"type", "must be at most %d characters of letters, digits, '_' and '-' in dot-separated parts, such as \"order.created\"", maxEventTypeLength)
	case sluice.IsReservedType(*in.Type):
		v.Add(prefix+"type", "must not begin with %q: those types are Sluice's own", sluice.ReservedTypePrefix)
	default:
		ev.Type = *in.Type
	}
	if len(in.Payload) > maxPayloadBytes {
		return ev, payloadTooLarge()
	}
	validatePayload(in.Payload, prefix+"payload", v)
	if k := in.CoalesceKey; k != nil && (*k == "" || len(*k) > maxCoalesceKeyLength) {
		v.Add(prefix+"coalesce_key", "must be 1 to %d characters", maxCoalesceKeyLength)
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

// validatePayload requires a JSON object (Standard Webhooks' "data") nested
// at most maxPayloadDepth deep, without NUL characters, and with numbers
// jsonb can hold. Its text was otherwise checked with the whole body.
func validatePayload(p json.RawMessage, field string, v *sluice.ValidationError) {
	p = bytes.TrimLeft(p, " \t\r\n")
	switch {
	case len(p) == 0:
		v.Add(field, "is required: a JSON object")
	case p[0] != '{':
		v.Add(field, "must be a JSON object, not %s", jsonKind(p[0]))
	case textcheck.Depth(p) > maxPayloadDepth:
		v.Add(field, "must nest arrays and objects at most %d deep", maxPayloadDepth)
	case textcheck.EscapedNUL(p):
		v.Add(field, "must not contain NUL characters (\\u0000)")
	case textcheck.LargeNumber(p) >= 0:
		v.Add(field, "must not hold numbers beyond Postgres's numeric (more than 131072 digits before the point or 16383 after): routing reads payloads as jsonb")
	}
}

// jsonKind names the kind of JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func payloadTooLarge() *Problem {
	return &Problem{Type: typeTooLarge, Title: "Payload too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("an event payload may be at most %d bytes", maxPayloadBytes)}
}
