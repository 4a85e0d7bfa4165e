package control

// The rules a tenant's consumers, event-type catalogue, portal links and
// posted payloads follow: the control layer checks them, and the doors
// name the limits in their forms and messages.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/mail"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/textcheck"
)

// Limits on consumers.
const (
	MaxConsumerName = 256 // characters
	MaxAlertEmail   = 254 // bytes
)

// consumerSettings checks a consumer's name and alert address, and
// returns the settings to store: the address as parsed, nil for none.
func consumerSettings(name string, alertEmail *string) (sluice.ConsumerSettings, error) {
	v := &sluice.ValidationError{}
	set := sluice.ConsumerSettings{Name: name}
	if utf8.RuneCountInString(name) > MaxConsumerName {
		v.Add("name", "must be at most %d characters", MaxConsumerName)
	}
	if e := alertEmail; e != nil {
		addr, err := mail.ParseAddress(*e)
		switch {
		case len(*e) > MaxAlertEmail || err != nil || addr.Name != "":
			v.Add("alert_email", "must be one email address such as ops@example.com, or null")
		default:
			set.AlertEmail = &addr.Address
		}
	}
	return set, v.Err()
}

// Portal link lifetimes.
const (
	DefaultPortalTTL = time.Hour
	MaxPortalTTL     = 7 * 24 * time.Hour
)

// Limits on events and event types.
const (
	MaxEventTypeName        = 128  // bytes
	MaxEventTypeDescription = 4096 // characters
	// MaxPayloadBytes bounds an event type's example; an event's payload
	// has the server's limit (SLUICE_MAX_PAYLOAD), by default the same.
	MaxPayloadBytes = sluice.DefaultMaxPayload
	// MaxPayloadDepth bounds the nesting of arrays and objects in a
	// payload, far below what a parser's stack would notice.
	MaxPayloadDepth = eventschema.MaxDepth
)

var eventTypeRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// EventTypeNameRule says what ValidEventTypeName accepts, for messages.
const EventTypeNameRule = "must be at most 128 characters of letters, digits, '_' and '-' in dot-separated parts, such as \"order.created\""

// ValidEventTypeName reports whether name may name an event type.
func ValidEventTypeName(name string) bool {
	return len(name) <= MaxEventTypeName && eventTypeRE.MatchString(name)
}

// checkEventTypeName checks the name of a catalogue entry a tenant
// changes: a valid name outside Sluice's own types.
func checkEventTypeName(name string, v *sluice.ValidationError) {
	switch {
	case name == "":
		v.Add("name", "is required")
	case !ValidEventTypeName(name):
		v.Add("name", "%s", EventTypeNameRule)
	case sluice.IsReservedType(name):
		v.Add("name", "must not begin with %q: those types are Sluice's own", sluice.ReservedTypePrefix)
	}
}

// CheckPayload requires a JSON object (Standard Webhooks' "data") nested at most
// MaxPayloadDepth deep, without NUL characters. p is valid JSON; its text
// was otherwise checked with the whole request.
func CheckPayload(p json.RawMessage, field string, v *sluice.ValidationError) {
	p = bytes.TrimLeft(p, " \t\r\n")
	switch {
	case len(p) == 0:
		v.Add(field, "is required: a JSON object")
	case p[0] != '{':
		v.Add(field, "must be a JSON object, not %s", jsonKind(p[0]))
	case textcheck.Depth(p) > MaxPayloadDepth:
		v.Add(field, "must nest arrays and objects at most %d deep", MaxPayloadDepth)
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

// checkEventType checks a catalogue entry's description, example and
// schema (its name is checked apart): the example, when set, is a payload; the
// schema, when set, compiles within the evaluation budget; and the example
// satisfies the schema. Example and Schema hold JSON text, or nothing.
func checkEventType(et sluice.EventType) error {
	v := &sluice.ValidationError{}
	if utf8.RuneCountInString(et.Description) > MaxEventTypeDescription {
		v.Add("description", "must be at most %d characters", MaxEventTypeDescription)
	}
	exampleOK := true
	if et.Example != nil {
		before := len(v.Fields)
		switch {
		case len(et.Example) > MaxPayloadBytes:
			v.Add("example", "must be at most %d bytes", MaxPayloadBytes)
		case !json.Valid(et.Example):
			v.Add("example", "is not JSON: %s", syntaxError(et.Example))
		default:
			CheckPayload(et.Example, "example", v)
		}
		exampleOK = len(v.Fields) == before
	}
	if et.Schema == nil {
		return v.Err()
	}
	sch, err := eventschema.Compile(et.Schema)
	if err != nil {
		v.Add("schema", "%s", err.Error())
		return v.Err()
	}
	if et.Example != nil && exampleOK {
		bad, err := sch.Check(et.Example, eventschema.NewBudget(eventschema.MaxRequestCost))
		switch {
		case err != nil:
			v.Add("example", "%s", err)
		case bad != nil:
			v.Add("example"+bad.Location, "does not satisfy the schema: %s", bad.Message)
		}
	}
	return v.Err()
}

// syntaxError says where JSON text stops being JSON.
func syntaxError(raw []byte) string {
	var x json.RawMessage
	err := json.Unmarshal(raw, &x)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return se.Error() + " (at byte " + strconv.FormatInt(se.Offset, 10) + ")"
	case err != nil:
		return err.Error()
	default:
		return "not valid"
	}
}
