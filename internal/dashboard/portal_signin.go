package dashboard

import (
	"errors"
	"net/http"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// openPortal is GET /portal?token=…, where a portal link points: it checks
// the link, starts a portal session of its consumer until the link
// expires, and redirects to the endpoints, so the token leaves the address
// bar (and the history entry the browser keeps). A session the browser
// already had ends first. A link that is not valid answers 403, whatever is
// wrong with it, and is a failed authentication of the client's address
// (ratelimit.go). Opening a link costs a token of its consumer's session
// bucket and of its tenant's, as a request of the session does.
func (d *Dashboard) openPortal(w http.ResponseWriter, r *http.Request) error {
	if err := d.checkAuth(r); err != nil {
		return err
	}
	g, err := d.ctl.OpenPortalLink(r.Context(), r.URL.Query().Get("token"))
	if errors.Is(err, control.ErrInvalidLink) {
		d.failAuth(r)
		return errInvalidLink()
	}
	if err != nil {
		return err
	}
	if err := d.limitSession(consumerBucket(g.Target.Consumer.ID), 1); err != nil {
		return err
	}
	if err := d.limitTenant(r, g.Target.Tenant.ID, 1); err != nil {
		return err
	}
	if old, ok := d.sessionFrom(r); ok {
		if err := d.ctl.EndSession(r.Context(), old.cookie); err != nil {
			return err
		}
	}
	ns, err := d.ctl.OpenPortalSession(r.Context(), g)
	if errors.Is(err, sluice.ErrNotFound) { // the consumer was deleted meanwhile
		return errInvalidLink()
	}
	if err != nil {
		return err
	}
	d.setSessionCookie(w, r, ns.Token, ns.ExpiresAt)
	return redirect(w, r, "/")
}
