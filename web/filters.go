package web

import (
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// DateTimeLocal is the layout of the filters' time values: an HTML
// datetime-local input's, read as UTC.
const DateTimeLocal = "2006-01-02T15:04"

// DeliveryFilters are a deliveries list's filters as its page shows them:
// a GET form, or links for a read-only session (which gets no forms).
type DeliveryFilters struct {
	// Path is the list's page.
	Path string
	// Type, Status, StatusCode, Since and Until are the filters applied,
	// as in the query ("" for none); Since and Until are DateTimeLocal
	// values.
	Type, Status, StatusCode, Since, Until string
	// Statuses says the status can be chosen (not on the dead letters).
	Statuses bool
	// Types are the event types offered: the tenant's catalogue.
	Types []string
	// Endpoints, on the dead letters, are the endpoints to choose from;
	// Endpoint is the one chosen, if any.
	Endpoints []sluice.Endpoint
	Endpoint  *uuid.UUID
	// Consumers, on the tenant's dead letters when it has consumers, are
	// the consumers to choose from; Consumer is the uid chosen ("" for
	// none). Like the endpoint, it picks whose deliveries are listed.
	Consumers []sluice.Consumer
	Consumer  string
	// Now is when the page is made, for the "last hour" links.
	Now time.Time
}

// Set reports whether any filter but the endpoint and the consumer is
// applied.
func (f DeliveryFilters) Set() bool {
	return f.Type != "" || f.Status != "" || f.StatusCode != "" || f.Since != "" || f.Until != ""
}

// query is the filters as query parameters.
func (f DeliveryFilters) query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Endpoint != nil {
		set("endpoint_id", f.Endpoint.String())
	}
	set("consumer", f.Consumer)
	set("type", f.Type)
	set("status", f.Status)
	set("status_code", f.StatusCode)
	set("since", f.Since)
	set("until", f.Until)
	return q
}

// link is the list with these filters, changed by name, value pairs (an
// empty value removes the filter).
func (f DeliveryFilters) link(pairs ...string) string {
	q := f.query()
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			q.Del(pairs[i])
		} else {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return f.Path
	}
	return f.Path + "?" + q.Encode()
}

// cleared is the list without type, status and time filters.
func (f DeliveryFilters) cleared() string {
	return f.link("type", "", "status", "", "status_code", "", "since", "", "until", "")
}

// filterLink is one choice of a read-only session's filters.
type filterLink struct {
	Label, URL string
	Current    bool
}

// statusLinks are the status choices.
func (f DeliveryFilters) statusLinks() []filterLink {
	out := []filterLink{{Label: "any status", URL: f.link("status", ""), Current: f.Status == ""}}
	for _, s := range deliveryStatuses {
		out = append(out, filterLink{Label: statusLabel(s), URL: f.link("status", s), Current: f.Status == s})
	}
	return out
}

// consumerLinks are the consumer choices: any, or one of them.
func (f DeliveryFilters) consumerLinks() []filterLink {
	out := []filterLink{{Label: "any consumer", URL: f.link("consumer", ""), Current: f.Consumer == ""}}
	for _, c := range f.Consumers {
		out = append(out, filterLink{Label: c.Name + " (" + c.UID + ")", URL: f.link("consumer", c.UID), Current: f.Consumer == c.UID})
	}
	return out
}

// codeLinks are the choices of the last attempt's status code: any, or a
// class of them.
func (f DeliveryFilters) codeLinks() []filterLink {
	out := []filterLink{{Label: "any answer", URL: f.link("status_code", ""), Current: f.StatusCode == ""}}
	for _, c := range []string{"200-299", "400-499", "500-599"} {
		out = append(out, filterLink{Label: c[:1] + "xx", URL: f.link("status_code", c), Current: f.StatusCode == c})
	}
	return out
}

// typeLinks are the event-type choices: the catalogue, and the type
// filtered on if it is not in it.
func (f DeliveryFilters) typeLinks() []filterLink {
	out := []filterLink{{Label: "any type", URL: f.link("type", ""), Current: f.Type == ""}}
	found := f.Type == ""
	for _, t := range f.Types {
		found = found || t == f.Type
		out = append(out, filterLink{Label: t, URL: f.link("type", t), Current: f.Type == t})
	}
	if !found {
		out = append(out, filterLink{Label: f.Type, URL: f.link("type", f.Type), Current: true})
	}
	return out
}

// timeLinks are the time-range choices: any time, or the last hour, day
// or week before Now.
func (f DeliveryFilters) timeLinks() []filterLink {
	out := []filterLink{{Label: "any time", URL: f.link("since", "", "until", ""), Current: f.Since == "" && f.Until == ""}}
	for _, p := range []struct {
		label string
		d     time.Duration
	}{{"last hour", time.Hour}, {"last 24 hours", 24 * time.Hour}, {"last 7 days", 7 * 24 * time.Hour}} {
		since := f.Now.Add(-p.d).UTC().Format(DateTimeLocal)
		out = append(out, filterLink{Label: p.label, URL: f.link("since", since, "until", "")})
	}
	return out
}

// endpointLinks are the endpoint choices of the dead letters.
func (f DeliveryFilters) endpointLinks() []filterLink {
	out := []filterLink{{Label: "all endpoints", URL: f.link("endpoint_id", ""), Current: f.Endpoint == nil}}
	for _, e := range f.Endpoints {
		out = append(out, filterLink{Label: endpointOption(e), URL: f.link("endpoint_id", e.ID.String()), Current: isFilter(f.Endpoint, e.ID)})
	}
	return out
}
