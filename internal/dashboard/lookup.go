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
	ctx, who := r.Context(), caller(r)
	_, _, err = d.ctl.Event(ctx, who, id)
	if err == nil {
		return redirect(w, r, "/events/"+id.String())
	}
	if !errors.Is(err, sluice.ErrNotFound) {
		return err
	}
	_, _, err = d.ctl.Delivery(ctx, who, id)
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
