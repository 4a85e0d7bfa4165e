package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// lookup is GET /lookup?id=: it redirects to the page of the event or
// delivery with that id when the scope sees one, and answers the 404 page
// otherwise (a malformed id, another tenant's or consumer's, or none).
func (d *Dashboard) lookup(w http.ResponseWriter, r *http.Request) error {
	id, err := uuid.Parse(strings.TrimSpace(r.URL.Query().Get("id")))
	if err != nil {
		return errLookup()
	}
	sc := d.in(r)
	_, _, err = sc.event(r.Context(), id)
	if err == nil {
		return redirect(w, r, "/events/"+id.String())
	}
	if !errors.Is(err, sluice.ErrNotFound) {
		return err
	}
	_, _, err = sc.delivery(r.Context(), id)
	if err == nil {
		return redirect(w, r, "/deliveries/"+id.String())
	}
	if !errors.Is(err, sluice.ErrNotFound) {
		return err
	}
	return errLookup()
}

// errLookup is the 404 page of a lookup that found nothing.
func errLookup() *pageError {
	e := errNotFound()
	e.detail = "No event or delivery has this id, or it belongs to another account."
	return e
}
