package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// eventsPerRequest is how many events of a batch count as one request.
const eventsPerRequest = 100

// limits are the API's bounds on its own use: the rate limits it shares
// with the dashboard and the portal (a token bucket per tenant, and the
// failed authentications per client address), and the large bodies read
// at once.
type limits struct {
	rate    *apirate.Limits
	batches chan struct{}
}

// limitRate charges every request one token of its tenant's bucket before
// anything else is done for it, answers 429 when the bucket is empty (503
// when the bucket, shared in Postgres, cannot be reached), and sets the
// RateLimit headers on every answer. A batch pays the rest of its cost
// once its events are counted (chargeBatch).
func (a *API) limitRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While no server takes writes (a failover), taking again within
		// the request's bound: nothing was taken when no connection could
		// be made.
		var res apirate.Result
		err := dbwait.Retry(r.Context(), sluice.NotConnected, func(ctx context.Context) error {
			var err error
			res, err = a.limits.rate.TakeTenant(ctx, tenantFrom(ctx).ID, 1)
			return err //nolint:wrapcheck // answered by writeError as it is
		})
		setRateHeaders(w.Header(), res)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if !res.Allowed {
			writeProblem(w, rateLimited(res))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// chargeBatch charges a batch of n events what it costs beyond the token
// limitRate took: one request per eventsPerRequest events, rounded up. The
// batch has been read by then, so it is charged even when the bucket
// cannot pay: the debt makes the tenant's next requests wait instead.
func (a *API) chargeBatch(w http.ResponseWriter, r *http.Request, n int) {
	extra := (n+eventsPerRequest-1)/eventsPerRequest - 1
	if extra <= 0 {
		return
	}
	setRateHeaders(w.Header(), a.limits.rate.ChargeTenant(r.Context(), tenantFrom(r.Context()).ID, extra))
}

// validationUnitsPerRequest is how much schema validation one request of
// the tenant's rate pays for: about the CPU a plain post costs (a
// millisecond or two), so that a token buys about as much CPU whether it is
// spent posting or validating, and a tenant at its rate validating the
// costliest events it may post uses no more of the machine than one
// posting plain events at its rate.
const validationUnitsPerRequest = 2_000

// payValidation pays, before an event is validated, for what its price
// says validating it will cost: a request per validationUnitsPerRequest
// units, rounded down, so small events pay nothing. The bucket must hold a
// token for it, or the event is refused unvalidated (429); the rest is
// charged into debt. So concurrent requests cannot each start an
// expensive validation on the same tokens: the first leaves the bucket in
// debt, and the others are refused. It returns the units paid for.
func (a *API) payValidation(w http.ResponseWriter, r *http.Request, units uint64) (uint64, error) {
	n := int(units / validationUnitsPerRequest)
	if n == 0 {
		return 0, nil
	}
	tenant := tenantFrom(r.Context()).ID
	res, err := a.limits.rate.TakeTenant(r.Context(), tenant, 1)
	setRateHeaders(w.Header(), res)
	if err != nil {
		return 0, err
	}
	if !res.Allowed {
		return 0, rateLimited(res)
	}
	if n > 1 {
		setRateHeaders(w.Header(), a.limits.rate.ChargeTenant(r.Context(), tenant, n-1))
	}
	return uint64(n) * validationUnitsPerRequest, nil
}

// chargeValidation charges the tenant's bucket one request per
// validationUnitsPerRequest units its events' validation cost beyond what
// payValidation paid, rounded down. Like chargeBatch, it may leave the
// bucket in debt.
func (a *API) chargeValidation(w http.ResponseWriter, r *http.Request, units uint64) {
	extra := int(units / validationUnitsPerRequest)
	if extra == 0 {
		return
	}
	setRateHeaders(w.Header(), a.limits.rate.ChargeTenant(r.Context(), tenantFrom(r.Context()).ID, extra))
}

// setRateHeaders sets the RateLimit fields of the IETF draft
// (draft-ietf-httpapi-ratelimit-headers): the bucket's capacity, its whole
// tokens left, and the seconds until it is full again.
func setRateHeaders(h http.Header, res apirate.Result) {
	h.Set("RateLimit-Limit", strconv.Itoa(res.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(res.Remaining))
	h.Set("RateLimit-Reset", strconv.Itoa(apirate.Seconds(res.Reset)))
}

func rateLimited(res apirate.Result) *Problem {
	after := apirate.RetryAfter(res)
	return &Problem{Type: typeRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
		Detail: fmt.Sprintf("this tenant's rate limit (bursts of %d, shared by the API, dashboard and portal) is used up; retry in %d s",
			res.Limit, after),
		RetryAfter: after}
}
