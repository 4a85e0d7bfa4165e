package dashboard

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/apirate"
)

// The dashboard and the portal draw from the rate limits of the API
// (apirate.Limits, shared through Config.Limits): each request of a
// session costs tokens of its tenant's bucket, as an API request does, and
// as many of the session's own smaller bucket first, so that one session
// (a portal link handed to a customer) cannot empty the tenant's bucket
// alone. Failed authentications (a wrong API key at sign-in, an unknown
// session cookie, an invalid portal link) cost the client's address a
// token of the bucket the API's 401s draw from. An address without one
// still has a secret credential (an API key, a session cookie, a portal
// link) looked up when apirate.GateAuth allows, and a valid one served: a
// neighbour's failures do not lock it out. A password sign-in from it is
// refused unlooked: a password can be guessed where a key cannot, and its
// hash is the costly part.

// heavyCost is what a page that aggregates costs, in tokens, where any
// other request costs one: the endpoint page (charts of an hour's and a
// day's attempts, a count of its dead deliveries), the dead-letter page (a
// count per endpoint shown) and the confirmation of a bulk replay (a
// count).
const heavyCost = 5

// heavyPages are the pages that cost heavyCost, by method and route.
var heavyPages = map[string]bool{
	"GET /endpoints/{id}":        true,
	"GET /dead":                  true,
	"GET /endpoints/{id}/replay": true,
}

// requestCost is what r costs, by its route; the dashboard is mounted at
// the root, so its route patterns are the ones it registers.
func requestCost(r *http.Request) int {
	if rc := chi.RouteContext(r.Context()); rc != nil && heavyPages[r.Method+" "+rc.RoutePattern()] {
		return heavyCost
	}
	return 1
}

// limitRequest takes the request's cost from the session's own bucket,
// then from its tenant's: a session over its own limit costs its tenant
// nothing.
func (d *Dashboard) limitRequest(r *http.Request, s session) error {
	cost := requestCost(r)
	if err := d.limitSession(s.bucketKey(), cost); err != nil {
		return err
	}
	return d.limitTenant(r, s.tenant.ID, cost)
}

// limitSession takes cost tokens from the bucket named key
// (session.bucketKey).
func (d *Dashboard) limitSession(key string, cost int) error {
	res := d.limits.TakeSession(key, cost)
	if res.Allowed {
		return nil
	}
	after := apirate.RetryAfter(res)
	return &pageError{status: http.StatusTooManyRequests, title: "Too many requests",
		detail:     fmt.Sprintf("This session is sending requests faster than it may. Try again in %s.", seconds(after)),
		retryAfter: after}
}

// limitTenant takes cost tokens from the tenant's bucket, the one its API
// requests draw from too.
func (d *Dashboard) limitTenant(r *http.Request, tenant uuid.UUID, cost int) error {
	res, err := d.limits.TakeTenant(r.Context(), tenant, cost)
	if err != nil {
		return err
	}
	if res.Allowed {
		return nil
	}
	after := apirate.RetryAfter(res)
	return &pageError{status: http.StatusTooManyRequests, title: "Too many requests",
		detail: fmt.Sprintf("This account has used up its rate limit, which its API, dashboard and portal share. "+
			"Try again in %s.", seconds(after)),
		retryAfter: after}
}

// checkAuth answers 429 to a client address that has failed to
// authenticate too often of late, before its credential is looked up.
func (d *Dashboard) checkAuth(r *http.Request) error {
	if res := d.limits.CheckAuth(apirate.ClientPrefix(r)); !res.Allowed {
		return errAuthThrottled(res)
	}
	return nil
}

// failAuth charges a failed authentication to the client's address.
func (d *Dashboard) failAuth(r *http.Request) {
	d.limits.FailAuth(apirate.ClientPrefix(r))
}

// gateAuth asks whether a secret credential from r's address is looked up
// (apirate.GateAuth), and answers 429 when it is not.
func (d *Dashboard) gateAuth(r *http.Request, credential string) (apirate.Gate, error) {
	g, res := d.limits.GateAuth(apirate.ClientPrefix(r), credential)
	if g == apirate.GateShut {
		return g, errAuthThrottled(res)
	}
	return g, nil
}

// failGated charges a credential let through by g and found wrong. Past
// the address's limit (apirate.GateLookUp) the failure answers 429, the
// error returned; otherwise it is nil and the caller answers as usual.
func (d *Dashboard) failGated(r *http.Request, g apirate.Gate) error {
	addr := apirate.ClientPrefix(r)
	if g == apirate.GateLookUp {
		d.limits.FailLookup(addr)
		return errAuthThrottled(d.limits.CheckAuth(addr))
	}
	d.limits.FailAuth(addr)
	return nil
}

func errAuthThrottled(res apirate.Result) *pageError {
	after := apirate.RetryAfter(res)
	return &pageError{status: http.StatusTooManyRequests, title: "Too many failed sign-in attempts",
		detail:     fmt.Sprintf("This address has failed to sign in too often. Try again in %s.", seconds(after)),
		retryAfter: after}
}

// seconds is n seconds in words.
func seconds(n int) string {
	if n == 1 {
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}
