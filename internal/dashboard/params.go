package dashboard

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
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
