package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/endpointrules"
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

	nulls []string // fields sent as null that cannot be null
}

// nonNullable are the fields an explicit null cannot clear.
var nonNullable = []string{"url", "description", "max_in_flight", "headers", "disabled", "consumer", "ordering", "delivery"}

// UnmarshalJSON decodes strictly (unknown fields refused), names a
// fractional or huge max_in_flight plainly, and records explicit nulls,
// which plain decoding would take for absent fields.
func (in *endpointInput) UnmarshalJSON(data []byte) error {
	type plain endpointInput // without this method
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "max_in_flight" && strings.HasPrefix(te.Value, "number") {
			v := &sluice.ValidationError{}
			v.Add("max_in_flight", "must be a whole number from 1 to %d", endpointrules.MaxInFlight)
			return v
		}
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	for _, name := range nonNullable {
		if raw, ok := fields[name]; ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			p.nulls = append(p.nulls, name)
		}
	}
	*in = endpointInput(p)
	return nil
}

type rateLimitInput struct {
	PerSecond *int     `json:"per_second"`
	PerMinute *int     `json:"per_minute"`
	Burst     *int     `json:"burst"`
	Adaptive  *bool    `json:"adaptive"`
	Min       *float64 `json:"min"`
}

// consumer returns the consumer of a new endpoint, or checks that an update
// leaves the endpoint's (current) unchanged: an endpoint never moves
// between consumers, or between a consumer and the tenant.
func (in endpointInput) consumer(current *string, creating bool, v *sluice.ValidationError) *string {
	switch {
	case in.Consumer == nil:
	case creating && !sluice.ValidConsumerUID(*in.Consumer):
		v.Add("consumer", sluice.ConsumerUIDRule)
	case creating:
		return in.Consumer
	case current == nil || *current != *in.Consumer:
		v.Add("consumer", "is chosen when the endpoint is created and cannot change")
	}
	return current
}

// apply writes the fields present in in over set, then validates the result.
func (in endpointInput) apply(set *sluice.EndpointSettings, creating, allowPrivate bool) error {
	v := &sluice.ValidationError{}
	set.Consumer = in.consumer(set.Consumer, creating, v)
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
	for _, name := range in.nulls {
		v.Add(name, "must not be null; leave it out to keep the current value")
	}
	if in.URL != nil {
		set.URL = strings.TrimSpace(*in.URL)
	}
	if in.Description != nil {
		set.Description = *in.Description
	}
	if in.RateLimit != nil {
		set.RateLimit = parseRateLimit(in.RateLimit, v)
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
	if in.BacklogAlert != nil {
		set.BacklogAlert = parseBacklogAlert(in.BacklogAlert, v)
	}
	if in.Ordering != nil {
		set.Ordering = *in.Ordering
	}

	endpointrules.Settings(*set, allowPrivate, v)
	return v.Err()
}

func parseRateLimit(raw json.RawMessage, v *sluice.ValidationError) *sluice.RateLimit {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var in rateLimitInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field == "adaptive":
			v.Add("rate_limit.adaptive", "must be true or false")
			return nil
		case errors.As(err, &te) && te.Field == "min":
			v.Add("rate_limit.min", "must be a number of deliveries a second")
			return nil
		}
		if errors.As(err, &te) && endpointrules.RateMax[te.Field] > 0 {
			v.Add("rate_limit."+te.Field, "must be a whole number from 1 to %d", endpointrules.RateMax[te.Field])
			return nil
		}
		v.Add("rate_limit", "must be an object with per_second or per_minute (whole numbers) and an optional burst")
		return nil
	}
	if !namesChecked(raw, reflect.TypeFor[rateLimitInput](), "rate_limit", v) {
		return nil
	}
	rl := &sluice.RateLimit{}
	switch {
	case (in.PerSecond == nil) == (in.PerMinute == nil):
		v.Add("rate_limit", "must set exactly one of per_second and per_minute")
		return nil
	case in.PerSecond != nil:
		rl.PerSecond = *in.PerSecond
		rl.Burst = rl.PerSecond
		endpointrules.Rate("per_second", rl.PerSecond, v)
	default:
		rl.PerMinute = *in.PerMinute
		rl.Burst = 1
		endpointrules.Rate("per_minute", rl.PerMinute, v)
	}
	if in.Burst != nil {
		rl.Burst = *in.Burst
		endpointrules.Rate("burst", rl.Burst, v)
	}
	if in.Adaptive != nil {
		rl.Adaptive = *in.Adaptive
	}
	if in.Min != nil {
		rl.Min = *in.Min
		if rl.Min <= 0 {
			rl.Min = -1 // refused by endpointrules.Adaptive, not taken for unset
		}
	}
	endpointrules.Adaptive(*rl, v)
	return rl
}

// parseBacklogAlert reads backlog_alert: null, or an object with queued
// and/or oldest_seconds (checked by endpointrules.BacklogAlert). A value
// that is not a whole number (or 0) is kept as -1 so the rules name it.
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
			return -1
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
