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
// (ratelimit.go; past the address's limit a link is looked up only as
// gateAuth allows). Opening a link costs a token of its consumer's session
// bucket and of its tenant's, as a request of the session does.
func (d *Dashboard) openPortal(w http.ResponseWriter, r *http.Request) error {
	token := r.URL.Query().Get("token")
	gate, err := d.gateAuth(r, token)
	if err != nil {
		return err
	}
	g, err := d.ctl.OpenPortalLink(r.Context(), token)
	if errors.Is(err, control.ErrInvalidLink) {
		if err := d.failGated(r, gate); err != nil {
			return err
		}
		return errInvalidLink()
	}
	if err != nil {
		return err
	}
	d.limits.Verified(token)
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
