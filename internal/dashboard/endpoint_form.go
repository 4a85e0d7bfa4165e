package dashboard

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/endpointrules"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// The endpoint form: its fields as sent, read back into settings and
// subscription patterns under the API's own rules (endpointrules).

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
		Types: map[string]bool{}, Patterns: f.Get("patterns"),
		Filter: strings.TrimSpace(f.Get("filter")), FilterPayload: strings.TrimSpace(f.Get("filter_payload")),
	}
	for _, t := range f["event_types"] {
		form.Types[t] = true
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

// formFilter reads the filter field: nil when empty; a refused filter is
// reported naming its failing place.
func formFilter(form web.EndpointForm, v *sluice.ValidationError) *filter.Filter {
	if form.Filter == "" {
		return nil
	}
	f, err := filter.Parse([]byte(form.Filter))
	var fe *filter.Error
	switch {
	case errors.As(err, &fe) && fe.Path != "":
		v.Add("filter", "at %s %s", fe.Path, fe.Msg)
	case errors.As(err, &fe):
		v.Add("filter", "%s", fe.Msg)
	case err != nil:
		v.Add("filter", "%s", err.Error())
	}
	return f
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

// settings checks the form and returns the endpoint settings it asks for,
// over base (which keeps what the form does not show: headers, consumer),
// and its subscription patterns and filter. A portal session (free false) subscribes
// only from the catalogue, or to everything; a tenant may add free-text
// patterns.
func formSettings(form web.EndpointForm, base sluice.EndpointSettings, catalogue []sluice.EventType, free, allowPrivate bool) (sluice.EndpointSettings, []string, *filter.Filter, error) {
	v := &sluice.ValidationError{}
	set := base
	set.URL, set.Description, set.Disabled = form.URL, form.Description, form.Disabled
	set.Ordering = sluice.OrderingNone
	if form.FIFO {
		set.Ordering = sluice.OrderingFIFO
	}
	if set.Delivery == "" { // a new endpoint: the form chooses
		set.Delivery = cmp.Or(form.Delivery, sluice.DeliveryPush)
	}
	if set.Delivery == sluice.DeliveryPoll {
		set.URL = "" // the form offers no URL field for one
	}
	if set.Headers == nil {
		set.Headers = map[string]string{}
	}
	n, err := strconv.Atoi(form.MaxInFlight)
	if err != nil {
		n = 0 // reported as out of range below
	}
	set.MaxInFlight = n
	set.RateLimit = formRateLimit(form, v)
	set.BacklogAlert = formBacklogAlert(form)
	endpointrules.Settings(set, allowPrivate, v)
	patterns := formPatterns(form, catalogue, free, v)
	f := formFilter(form, v)
	return set, patterns, f, v.Err()
}

// formRateLimit reads the rate-limit fields: none, or a rate per second or
// per minute with an optional burst (by default the rate per second, or 1).
func formRateLimit(form web.EndpointForm, v *sluice.ValidationError) *sluice.RateLimit {
	if form.RateKind == rateNone {
		return nil
	}
	if form.RateKind != ratePerSecond && form.RateKind != ratePerMinute {
		v.Add("rate_limit", "must be none, per second or per minute")
		return nil
	}
	rate := atoiOrZero(form.Rate)
	endpointrules.Rate(form.RateKind, rate, v)
	rl := &sluice.RateLimit{Burst: 1}
	if form.RateKind == ratePerSecond {
		rl.PerSecond, rl.Burst = rate, rate
	} else {
		rl.PerMinute = rate
	}
	if form.Burst != "" {
		rl.Burst = atoiOrZero(form.Burst)
		endpointrules.Rate("burst", rl.Burst, v)
	}
	rl.Adaptive = form.Adaptive
	if form.Min != "" {
		m, err := strconv.ParseFloat(form.Min, 64)
		if err != nil || m <= 0 {
			m = -1 // refused by endpointrules.Adaptive
		}
		rl.Min = m
	}
	endpointrules.Adaptive(*rl, v)
	return rl
}

// formBacklogAlert reads the backlog alert's fields: nil when both are
// empty; a value that is not a whole number is kept as -1, for
// endpointrules.BacklogAlert to refuse.
func formBacklogAlert(form web.EndpointForm) *sluice.BacklogAlert {
	if form.BacklogQueued == "" && form.BacklogOldest == "" {
		return nil
	}
	whole := func(s string) int {
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return -1
		}
		return n
	}
	return &sluice.BacklogAlert{Queued: whole(form.BacklogQueued), OldestSeconds: whole(form.BacklogOldest)}
}

// formPatterns collects the subscription's patterns: the ticked boxes
// ("*" or names of the catalogue) and, when free, the free-text patterns.
func formPatterns(form web.EndpointForm, catalogue []sluice.EventType, free bool, v *sluice.ValidationError) []string {
	var patterns []string
	for t := range form.Types {
		if t != "*" && !inCatalogue(catalogue, t) {
			v.Add("event_types", "%q is not in the event-type catalogue", t)
			continue
		}
		patterns = append(patterns, t)
	}
	slices.Sort(patterns)
	if free {
		for _, p := range strings.FieldsFunc(form.Patterns, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
			if !slices.Contains(patterns, p) {
				patterns = append(patterns, p)
			}
		}
	}
	if len(patterns) > 0 {
		endpointrules.Patterns("event_types", patterns, v)
	}
	return patterns
}

func itoaOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func atoiOrZero(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
