package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Limits on events.
const (
	maxEventTypeLength   = 128
	maxPayloadBytes      = 256 << 10
	maxCoalesceKeyLength = 255
	maxIdempotencyKey    = 255
	maxBatchEvents       = 1000
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
}

type batchInput struct {
	Events []eventInput `json:"events"`
}

// toNewEvent validates in, naming fields under prefix. An oversize payload
// is a 413, not a validation failure.
func (in eventInput) toNewEvent(prefix string, v *sluice.ValidationError) (sluice.NewEvent, error) {
	ev := sluice.NewEvent{Payload: in.Payload, CoalesceKey: in.CoalesceKey}
	switch {
	case in.Type == nil || *in.Type == "":
		v.Add(prefix+"type", "is required")
	case len(*in.Type) > maxEventTypeLength || !eventTypeRE.MatchString(*in.Type):
		v.Add(prefix+"type", "must be at most %d characters of letters, digits, '_' and '-' in dot-separated parts, such as \"order.created\"", maxEventTypeLength)
	default:
		ev.Type = *in.Type
	}
	if len(in.Payload) > maxPayloadBytes {
		return ev, payloadTooLarge()
	}
	if in.Payload == nil || bytes.Equal(in.Payload, []byte("null")) {
		v.Add(prefix+"payload", "is required: any JSON value but null")
	}
	if k := in.CoalesceKey; k != nil && (*k == "" || len(*k) > maxCoalesceKeyLength) {
		v.Add(prefix+"coalesce_key", "must be 1 to %d characters", maxCoalesceKeyLength)
	}
	return ev, nil
}

func payloadTooLarge() *Problem {
	return &Problem{Type: typeTooLarge, Title: "Payload too large", Status: http.StatusRequestEntityTooLarge,
		Detail: fmt.Sprintf("an event payload may be at most %d bytes", maxPayloadBytes)}
}
