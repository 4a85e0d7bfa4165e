package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// endpointInput is the body of POST and PATCH /v1/endpoints: every field
// optional so PATCH can tell "absent" from "set". RateLimit stays raw to
// tell "absent" from an explicit null, which removes the limit; an
// explicit null for any other field is refused (nulls).
type endpointInput struct {
	URL         *string            `json:"url"`
	Description *string            `json:"description"`
	RateLimit   json.RawMessage    `json:"rate_limit"`
	MaxInFlight *int               `json:"max_in_flight"`
	Headers     *map[string]string `json:"headers"`
	Disabled    *bool              `json:"disabled"`
	// BacklogAlert stays raw like RateLimit: null removes it.
	BacklogAlert json.RawMessage `json:"backlog_alert"`
	// Consumer is chosen at creation only (consumer below).
	Consumer *string `json:"consumer"`
	Ordering *string `json:"ordering"`
	// Delivery is chosen at creation only, like Consumer.
	Delivery *string `json:"delivery"`

	nulls   []string             // fields sent as null that cannot be null
	options control.OptionsInput // the delivery options, as sent
}

// nonNullable are the fields an explicit null cannot clear.
var nonNullable = []string{"url", "description", "max_in_flight", "headers", "disabled", "consumer", "ordering", "delivery"}

// UnmarshalJSON decodes strictly (unknown fields refused), takes a
// fractional or huge max_in_flight for one out of range (notWhole),
// records explicit nulls, which plain decoding would take for absent
// fields, and hands the delivery options on as sent (options).
func (in *endpointInput) UnmarshalJSON(data []byte) error {
	type plain endpointInput // without this method
	var p plain
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		p.options, data = options(fields, data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field != "max_in_flight" || !strings.HasPrefix(te.Value, "number") {
			return err //nolint:wrapcheck // decodeJSON reads encoding/json's own errors to say what is wrong
		}
		p.MaxInFlight = new(notWhole)
	}
	for _, name := range nonNullable {
		if raw, ok := fields[name]; ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			p.nulls = append(p.nulls, name)
		}
	}
	*in = endpointInput(p)
	return nil
}

// options takes the delivery options out of a body's fields: the
// control layer reads them (control.OptionsInput). It returns them and
// the body without them.
func options(fields map[string]json.RawMessage, body []byte) (control.OptionsInput, []byte) {
	var opts control.OptionsInput
	for _, name := range sluice.DeliveryOptionNames {
		if raw, ok := fields[name]; ok {
			if opts == nil {
				opts = control.OptionsInput{}
			}
			opts[name] = raw
			delete(fields, name)
		}
	}
	if opts == nil {
		return nil, body
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return opts, body // cannot happen: fields was decoded from JSON
	}
	return opts, rest
}

type rateLimitInput struct {
	PerSecond *int     `json:"per_second"`
	PerMinute *int     `json:"per_minute"`
	Burst     *int     `json:"burst"`
	Adaptive  *bool    `json:"adaptive"`
	Min       *float64 `json:"min"`
}

// notWhole stands for a number that is not a whole one, where the rules
// want one: out of every range, the control layer refuses it naming the
// range.
const notWhole = -1

// input is what in asks of the control layer, or the problems of the
// fields it could not read: explicit nulls, and a rate_limit or
// backlog_alert that is not the object it must be.
func (in endpointInput) input() (control.EndpointInput, error) {
	v := &sluice.ValidationError{}
	for _, name := range in.nulls {
		v.Add(name, "must not be null; leave it out to keep the current value")
	}
	out := control.EndpointInput{
		URL: in.URL, Description: in.Description, MaxInFlight: in.MaxInFlight, Headers: in.Headers,
		Disabled: in.Disabled, Consumer: in.Consumer, Ordering: in.Ordering, Delivery: in.Delivery,
		Options: in.options,
	}
	if in.RateLimit != nil {
		out.RateLimit = parseRateLimit(in.RateLimit, v)
		out.ClearRateLimit = out.RateLimit == nil
	}
	if in.BacklogAlert != nil {
		out.BacklogAlert = parseBacklogAlert(in.BacklogAlert, v)
		out.ClearBacklogAlert = out.BacklogAlert == nil
	}
	return out, v.Err()
}

// parseRateLimit reads rate_limit: nil for null (or what it refuses, in
// v). A rate that is not a whole number is read as notWhole.
func parseRateLimit(raw json.RawMessage, v *sluice.ValidationError) *control.RateLimitInput {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var in rateLimitInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			te = &json.UnmarshalTypeError{}
		}
		switch te.Field {
		case "per_second":
			in.PerSecond = new(notWhole)
		case "per_minute":
			in.PerMinute = new(notWhole)
		case "burst":
			in.Burst = new(notWhole)
		case "adaptive":
			v.Add("rate_limit.adaptive", "must be true or false")
			return nil
		case "min":
			v.Add("rate_limit.min", "must be a number of deliveries a second")
			return nil
		default:
			v.Add("rate_limit", "must be an object with per_second or per_minute (whole numbers) and an optional burst")
			return nil
		}
	}
	if !namesChecked(raw, reflect.TypeFor[rateLimitInput](), "rate_limit", v) {
		return nil
	}
	return &control.RateLimitInput{PerSecond: in.PerSecond, PerMinute: in.PerMinute, Burst: in.Burst,
		Adaptive: in.Adaptive != nil && *in.Adaptive, Min: in.Min}
}

// parseBacklogAlert reads backlog_alert: null, or an object with queued
// and/or oldest_seconds. A value that is not a whole number (or 0) is
// read as notWhole.
func parseBacklogAlert(raw json.RawMessage, v *sluice.ValidationError) *sluice.BacklogAlert {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var in backlogAlertInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		v.Add("backlog_alert", "must be null or an object with queued and/or oldest_seconds (whole numbers)")
		return nil
	}
	if !namesChecked(raw, reflect.TypeFor[backlogAlertInput](), "backlog_alert", v) {
		return nil
	}
	whole := func(raw json.RawMessage) int {
		if raw == nil {
			return 0
		}
		i, err := strconv.ParseInt(string(raw), 10, 32) // a JSON string, fraction or exponent fails
		if err != nil || i < 1 {
			return notWhole
		}
		return int(i)
	}
	return &sluice.BacklogAlert{Queued: whole(in.Queued), OldestSeconds: whole(in.OldestSeconds)}
}

type backlogAlertInput struct {
	Queued        json.RawMessage `json:"queued"`
	OldestSeconds json.RawMessage `json:"oldest_seconds"`
}

// namesChecked checks the names of field, an object kept raw (the body's
// names were checked as free-form JSON there), against t's, adding what
// it refuses to v; it reports whether they passed.
func namesChecked(raw json.RawMessage, t reflect.Type, field string, v *sluice.ValidationError) bool {
	err := checkNames(raw, t, field)
	if err == nil {
		return true
	}
	var fields *sluice.ValidationError
	if errors.As(err, &fields) {
		v.Fields = append(v.Fields, fields.Fields...)
	} else {
		v.Add(field, "%s", err)
	}
	return false
}
