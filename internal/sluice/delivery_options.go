package sluice

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// DeliveryOptions are an endpoint's own choices of how its deliveries are
// sent; a nil option is the server's default. They are fields of the
// endpoint in the API and are stored together, as one document that is
// null while every option is the default: an endpoint that uses none pays
// nothing for them.
//
// An option is added here (with its json name, and its text in Texts),
// read and checked where the control layer applies it (control's
// delivery_options.go), shown on the endpoint form and page (web), and
// used where deliveries are sent (dispatch).
type DeliveryOptions struct {
	// TimeoutSeconds bounds each attempt, in whole seconds
	// (MinTimeoutSeconds to MaxTimeoutSeconds); nil: SLUICE_DELIVERY_TIMEOUT.
	TimeoutSeconds *int `json:"timeout_seconds"`
	// RetrySchedule is the waits between failed attempts: len+1 attempts
	// in all. Nil: SLUICE_RETRY_SCHEDULE.
	RetrySchedule Schedule `json:"retry_schedule"`
	// Verification is VerifyNone or VerifyChallenge; nil: VerifyNone.
	Verification *string `json:"verification"`
}

// Verification modes: with VerifyChallenge, an endpoint receives nothing
// but a signed challenge (OpEndpointVerification) until it answers one.
const (
	VerifyNone      = "none"
	VerifyChallenge = "challenge"
)

// Challenged reports whether the endpoint must answer a challenge before
// anything is sent to it.
func (o DeliveryOptions) Challenged() bool {
	return o.Verification != nil && *o.Verification == VerifyChallenge
}

// Bounds of the delivery options.
const (
	MinTimeoutSeconds = 1
	MaxTimeoutSeconds = 60
	MaxRetrySteps     = 20
	MaxRetryTotal     = 7 * 24 * time.Hour
)

// IsZero reports whether every option is the default.
func (o DeliveryOptions) IsZero() bool {
	return reflect.ValueOf(o).IsZero()
}

// Timeout is the attempt timeout the options set; 0 for the default.
func (o DeliveryOptions) Timeout() time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}

// Texts are the options as a form shows them, by json name: "" for the
// default.
func (o DeliveryOptions) Texts() map[string]string {
	t := map[string]string{"retry_schedule": strings.ReplaceAll(o.RetrySchedule.String(), ",", ", ")}
	if o.TimeoutSeconds != nil {
		t["timeout_seconds"] = strconv.Itoa(*o.TimeoutSeconds)
	}
	if o.Verification != nil {
		t["verification"] = *o.Verification
	}
	return t
}

// DeliveryOptionNames are the json names of the delivery options, in the
// order DeliveryOptions declares them.
var DeliveryOptionNames = func() []string {
	t := reflect.TypeFor[DeliveryOptions]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}()

// Schedule is a list of waits, written in JSON as Go durations ("30s",
// "5m", "1h30m").
type Schedule []time.Duration

// MarshalJSON writes each wait as a Go duration; a nil schedule is null.
func (s Schedule) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	out := make([]string, len(s))
	for i, d := range s {
		out[i] = d.String()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode schedule: %w", err)
	}
	return b, nil
}

// UnmarshalJSON reads a list of Go durations.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var in []string
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("decode schedule: %w", err)
	}
	if in == nil {
		*s = nil
		return nil
	}
	out := make(Schedule, len(in))
	for i, text := range in {
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("decode schedule step %d: %w", i, err)
		}
		out[i] = d
	}
	*s = out
	return nil
}

// String writes the schedule as a comma-separated list of Go durations,
// as SLUICE_RETRY_SCHEDULE is written; "" when nil.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
