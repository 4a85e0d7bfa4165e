package dashboard

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// The endpoint form: its fields as sent, read into what they ask of the
// control layer, which checks them under the API's own rules.

// Rate-limit kinds of the form's rate_kind field.
const (
	rateNone      = ""
	ratePerSecond = "per_second"
	ratePerMinute = "per_minute"
)

// readEndpointForm reads the fields of a submitted endpoint form.
func readEndpointForm(f url.Values) web.EndpointForm {
	form := web.EndpointForm{
		Delivery: f.Get("delivery"),
		URL:      strings.TrimSpace(f.Get("url")), Description: f.Get("description"),
		RateKind: f.Get("rate_kind"), Rate: strings.TrimSpace(f.Get("rate")), Burst: strings.TrimSpace(f.Get("burst")),
		Adaptive: f.Get("adaptive") == "1", Min: strings.TrimSpace(f.Get("min")),
		MaxInFlight: strings.TrimSpace(f.Get("max_in_flight")), Disabled: f.Get("disabled") == "1", FIFO: f.Get("fifo") == "1",
		BacklogQueued: strings.TrimSpace(f.Get("backlog_queued")), BacklogOldest: strings.TrimSpace(f.Get("backlog_oldest")),
		Options: map[string]string{},
		Types:   map[string]bool{}, Patterns: f.Get("patterns"),
		Filter: strings.TrimSpace(f.Get("filter")), FilterPayload: strings.TrimSpace(f.Get("filter_payload")),
	}
	for _, t := range f["event_types"] {
		form.Types[t] = true
	}
	for _, name := range sluice.DeliveryOptionFields {
		form.Options[name] = f.Get(name)
	}
	return form
}

// endpointForm fills the form with an endpoint's settings, patterns (those
// of the catalogue, and "*", as ticked boxes, the rest as free text) and
// filter (when its subscriptions have one between them: filterNote warns
// about the others).
func endpointForm(ep sluice.Endpoint, patterns, filters []string, catalogue []sluice.EventType) web.EndpointForm {
	form := web.EndpointForm{
		URL: ep.URL, Description: ep.Description, MaxInFlight: strconv.Itoa(ep.MaxInFlight),
		Disabled: ep.Disabled, FIFO: ep.Ordering == sluice.OrderingFIFO, Types: map[string]bool{},
	}
	form.Options = ep.DeliveryOptions.Texts()
	if a := ep.BacklogAlert; a != nil {
		form.BacklogQueued, form.BacklogOldest = itoaOrEmpty(a.Queued), itoaOrEmpty(a.OldestSeconds)
	}
	if rl := ep.RateLimit; rl != nil {
		form.Burst = strconv.Itoa(rl.Burst)
		form.Adaptive = rl.Adaptive
		if rl.Min > 0 {
			form.Min = strconv.FormatFloat(rl.Min, 'f', -1, 64)
		}
		if rl.PerSecond > 0 {
			form.RateKind, form.Rate = ratePerSecond, strconv.Itoa(rl.PerSecond)
		} else {
			form.RateKind, form.Rate = ratePerMinute, strconv.Itoa(rl.PerMinute)
		}
	}
	var free []string
	for _, p := range patterns {
		if p == "*" || inCatalogue(catalogue, p) {
			form.Types[p] = true
		} else {
			free = append(free, p)
		}
	}
	form.Patterns = strings.Join(free, " ")
	if len(filters) == 1 {
		form.Filter = indentJSON(filters[0])
	}
	return form
}

// filterNote warns, on the form of an endpoint whose subscriptions (made
// through the API) have different filters, that saving replaces them.
func filterNote(filters []string) string {
	if len(filters) < 2 {
		return ""
	}
	return "This endpoint's subscriptions have different filters (see its page). Saving replaces them with one subscription, with the filter above."
}

// indentJSON lays out JSON text for a textarea (as it is when it is not JSON).
func indentJSON(s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		return s
	}
	return b.String()
}

// filterTests tries the form's filter on the pasted payload or, without
// one, on the examples of the ticked event types of the catalogue.
func filterTests(form web.EndpointForm, catalogue []sluice.EventType) ([]web.FilterTest, string) {
	if form.Filter == "" {
		return nil, "There is no filter to test: every event of the ticked types is delivered."
	}
	f, err := filter.Parse([]byte(form.Filter))
	if err != nil {
		return nil, "The filter is not valid: " + strings.TrimPrefix(err.Error(), "filter: ")
	}
	try := func(source string, payload []byte) web.FilterTest {
		ok, err := f.Match(payload)
		if err != nil {
			return web.FilterTest{Source: source, Error: "not JSON"}
		}
		return web.FilterTest{Source: source, Matches: ok}
	}
	if form.FilterPayload != "" {
		p := []byte(form.FilterPayload)
		if !json.Valid(p) || !strings.HasPrefix(form.FilterPayload, "{") {
			return []web.FilterTest{{Source: "the pasted payload", Error: "is not a JSON object"}}, ""
		}
		return []web.FilterTest{try("the pasted payload", p)}, ""
	}
	var tests []web.FilterTest
	for _, et := range catalogue {
		if form.Types[et.Name] && len(et.Example) > 0 && string(et.Example) != "null" {
			tests = append(tests, try("the example of "+et.Name, et.Example))
		}
	}
	if len(tests) == 0 {
		return nil, "No example to test on: tick event types of the catalogue that have one, or paste a payload."
	}
	return tests, ""
}

func inCatalogue(catalogue []sluice.EventType, name string) bool {
	return slices.ContainsFunc(catalogue, func(et sluice.EventType) bool { return et.Name == name })
}

// formInput is what the form asks of an endpoint: every setting it shows
// (a poll endpoint's has no URL), and its subscription, to the ticked
// event types and, from a tenant's form (free), the free-text patterns.
// A value that is not a number is sent as one out of range, for the
// control layer to refuse with the API's message.
func formInput(form web.EndpointForm, creating, free bool) (control.EndpointInput, error) {
	v := &sluice.ValidationError{}
	in := control.EndpointInput{
		Description: &form.Description, Disabled: &form.Disabled,
		MaxInFlight: new(atoiOr(form.MaxInFlight, 0)),
		Ordering:    new(sluice.OrderingNone),
	}
	if form.FIFO {
		in.Ordering = new(sluice.OrderingFIFO)
	}
	if creating {
		in.Delivery = new(cmp.Or(form.Delivery, sluice.DeliveryPush))
	}
	if !creating || *in.Delivery != sluice.DeliveryPoll {
		in.URL = &form.URL
	}
	in.RateLimit = formRateLimit(form, v)
	in.ClearRateLimit = in.RateLimit == nil
	in.BacklogAlert = formBacklogAlert(form)
	in.ClearBacklogAlert = in.BacklogAlert == nil
	in.Options = control.FormOptions(form.Options)
	sub := &control.SubscriptionInput{Listed: slices.Sorted(maps.Keys(form.Types)), Filter: json.RawMessage(form.Filter)}
	if free {
		sub.Patterns = strings.FieldsFunc(form.Patterns, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	}
	in.Subscription = sub
	return in, v.Err()
}

// formRateLimit reads the rate-limit fields: none, or a rate per second or
// per minute with an optional burst.
func formRateLimit(form web.EndpointForm, v *sluice.ValidationError) *control.RateLimitInput {
	if form.RateKind == rateNone {
		return nil
	}
	rl := &control.RateLimitInput{Adaptive: form.Adaptive}
	switch form.RateKind {
	case ratePerSecond:
		rl.PerSecond = new(atoiOr(form.Rate, 0))
	case ratePerMinute:
		rl.PerMinute = new(atoiOr(form.Rate, 0))
	default:
		v.Add("rate_limit", "must be none, per second or per minute")
		return nil
	}
	if form.Burst != "" {
		rl.Burst = new(atoiOr(form.Burst, 0))
	}
	if form.Min != "" {
		m, err := strconv.ParseFloat(form.Min, 64)
		if err != nil {
			m = -1 // refused as the API refuses it
		}
		rl.Min = &m
	}
	return rl
}

// formBacklogAlert reads the backlog alert's fields: nil when both are
// empty; a value that is not a whole number is sent as -1, refused as out
// of range.
func formBacklogAlert(form web.EndpointForm) *sluice.BacklogAlert {
	if form.BacklogQueued == "" && form.BacklogOldest == "" {
		return nil
	}
	whole := func(s string) int {
		if s == "" {
			return 0
		}
		if n := atoiOr(s, -1); n >= 1 {
			return n
		}
		return -1
	}
	return &sluice.BacklogAlert{Queued: whole(form.BacklogQueued), OldestSeconds: whole(form.BacklogOldest)}
}

func itoaOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// atoiOr is s as a whole number, or otherwise when it is not one.
func atoiOr(s string, otherwise int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return otherwise
	}
	return n
}
