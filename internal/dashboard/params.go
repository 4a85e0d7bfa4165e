package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// pathID parses the {id} of a route; a malformed one is not found, like an
// unknown one.
func pathID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.Nil, errNotFound()
	}
	return id, nil
}

// pageParams reads the ?cursor= of a list page.
func pageParams(r *http.Request) (sluice.PageParams, error) {
	p := sluice.PageParams{Limit: sluice.DefaultPageLimit}
	if c := r.URL.Query().Get("cursor"); c != "" {
		id, err := uuid.Parse(c)
		if err != nil {
			return p, errBadRequest("The page cursor is malformed.")
		}
		p.After = &id
	}
	return p, nil
}

// olderURL is the link to the page after this one: this URL with its
// cursor moved to next, flashes dropped. It is "" on the last page.
func olderURL(r *http.Request, next *uuid.UUID) string {
	if next == nil {
		return ""
	}
	q := r.URL.Query()
	q.Del("queued")
	q.Del("replayed")
	q.Del("done")
	q.Set("cursor", next.String())
	return r.URL.Path + "?" + q.Encode()
}

// queuedFlash reads the ?queued=N a bulk replay redirects with.
func queuedFlash(r *http.Request) *int64 {
	raw := r.URL.Query().Get("queued")
	if raw == "" {
		return nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// deliveryStatus reads an optional delivery status filter.
func deliveryStatus(raw string) (*string, error) {
	switch raw {
	case "":
		return nil, nil
	case sluice.DeliveryPending, sluice.DeliveryDelivered, sluice.DeliveryFailed, sluice.DeliveryDead:
		return &raw, nil
	default:
		return nil, errBadRequest("Unknown delivery status " + strconv.Quote(raw) + ".")
	}
}

// deliveryFilters reads the filters of a deliveries list into f, and into
// v as the page shows them: ?type= (an exact event type), ?status= when
// statuses, and ?since= and ?until= (the creation time range [since,
// until), in UTC, as an HTML datetime-local input sends it).
func deliveryFilters(r *http.Request, statuses bool, f *sluice.DeliveryFilter, v *web.DeliveryFilters) error {
	q := r.URL.Query()
	v.Statuses = statuses
	if t := strings.TrimSpace(q.Get("type")); t != "" {
		f.EventType, v.Type = &t, t
	}
	if statuses {
		status, err := deliveryStatus(q.Get("status"))
		if err != nil {
			return err
		}
		if status != nil {
			f.Status, v.Status = status, *status
		}
	}
	if c := strings.TrimSpace(q.Get("status_code")); c != "" {
		f.StatusCode, v.StatusCode = &c, c
	}
	var err error
	if f.Since, v.Since, err = filterTime(q.Get("since")); err != nil {
		return err
	}
	f.Until, v.Until, err = filterTime(q.Get("until"))
	return err
}

// filterTimeLayouts are the time filters' accepted forms: a datetime-local
// input's, with or without seconds, and RFC 3339.
var filterTimeLayouts = []string{web.DateTimeLocal, "2006-01-02T15:04:05", time.RFC3339}

// filterTime reads a time filter, UTC unless it says otherwise; "" is no
// filter. It returns the time and its value for the filter's input.
func filterTime(raw string) (*time.Time, string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, "", nil
	}
	for _, layout := range filterTimeLayouts {
		if t, err := time.ParseInLocation(layout, raw, time.UTC); err == nil {
			t = t.UTC()
			if t.Second() != 0 {
				return &t, t.Format("2006-01-02T15:04:05"), nil
			}
			return &t, t.Format(web.DateTimeLocal), nil
		}
	}
	return nil, "", errBadRequest("The time " + strconv.Quote(raw) + " is not a date and time like 2030-01-31T14:05.")
}

// withQuery appends query parameters to a path.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// endpointIDs lists the distinct endpoints of deliveries, in order.
func endpointIDs(ds []sluice.Delivery) []uuid.UUID {
	var out []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for _, d := range ds {
		if !seen[d.EndpointID] {
			seen[d.EndpointID] = true
			out = append(out, d.EndpointID)
		}
	}
	return out
}
