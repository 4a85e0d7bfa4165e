package web

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// statusWords are the words a status badge shows for the raw values of
// the API (endpoint, circuit and delivery statuses); the badge's class
// keeps the raw value.
var statusWords = map[string]string{
	sluice.EndpointActive:      "Active",
	sluice.EndpointThrottled:   "Throttled",
	sluice.EndpointCircuitOpen: "Circuit open",
	sluice.EndpointDisabled:    "Disabled",
	sluice.CircuitClosed:       "Closed",
	sluice.CircuitHalfOpen:     "Half-open",
	sluice.CircuitOpen:         "Open",
	sluice.DeliveryPending:     "Pending",
	sluice.DeliveryDelivered:   "Delivered",
	sluice.DeliveryFailed:      "Failed, will retry",
	sluice.DeliveryDead:        "Dead",
}

// statusLabel is a status in words: statusWords, or the raw value with its
// first letter capitalised and underscores as spaces.
func statusLabel(status string) string {
	if w, ok := statusWords[status]; ok {
		return w
	}
	s := strings.ReplaceAll(status, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// endpointStatusLabel is an endpoint's status in words, with why a
// disabled one is disabled: "Disabled — gone".
func endpointStatusLabel(e sluice.Endpoint) string {
	s := statusLabel(e.Status)
	if e.Status != sluice.EndpointDisabled || e.DisabledReason == nil {
		return s
	}
	switch *e.DisabledReason {
	case sluice.DisabledGone:
		return s + " — gone"
	case sluice.DisabledFailing:
		return s + " — failing"
	default:
		return s + " — by hand"
	}
}

// maxErrorText is how much of an attempt's error a list row shows; the
// rest is in the row's title attribute.
const maxErrorText = 80

// attemptError is an attempt's error text unless it only repeats the
// status code shown beside it (the sender's "status 422" of an HTTP 422).
func attemptError(a sluice.Attempt) string {
	if a.Error == nil {
		return ""
	}
	if a.StatusCode != nil && *a.Error == "status "+strconv.Itoa(*a.StatusCode) {
		return ""
	}
	return *a.Error
}

// attemptDetail is what a list says of why an attempt failed: its error,
// or else the start of the response body.
func attemptDetail(a sluice.Attempt) string {
	if s := attemptError(a); s != "" {
		return s
	}
	if a.ResponseBody != nil {
		return strings.Join(strings.Fields(*a.ResponseBody), " ")
	}
	return ""
}

// truncate cuts s to at most n characters, ending it with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}
