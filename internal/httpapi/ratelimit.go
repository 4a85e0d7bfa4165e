package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/store"
)

// rateRecheck is how long a tenant's own API rate is trusted before it is
// read again, and so how soon `sluice tenant set-rate` reaches a process.
const rateRecheck = time.Second

// eventsPerRequest is how many events of a batch count as one request.
const eventsPerRequest = 100

// limits are the API's bounds on its own use: a token bucket per tenant,
// and the large batches read at once.
type limits struct {
	def     apirate.Rate
	buckets *apirate.Limiter[uuid.UUID]
	rates   rateCache
	batches chan struct{}
}

func newLimits(def apirate.Rate, maxLargeBatches int, now func() time.Time) *limits {
	return &limits{
		def:     def,
		buckets: apirate.NewLimiter[uuid.UUID](now),
		rates:   rateCache{entries: map[uuid.UUID]cachedRate{}},
		batches: make(chan struct{}, maxLargeBatches),
	}
}

// limitRate charges every request one token of its tenant's bucket before
// anything else is done for it, answers 429 when the bucket is empty, and
// sets the RateLimit headers on every answer. A batch pays the rest of its
// cost once its events are counted (chargeBatch).
func (a *API) limitRate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := tenantFrom(r.Context()).ID
		res := a.limits.buckets.Take(id, a.tenantRate(r.Context(), id), 1)
		setRateHeaders(w.Header(), res)
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
	id := tenantFrom(r.Context()).ID
	setRateHeaders(w.Header(), a.limits.buckets.Charge(id, a.tenantRate(r.Context(), id), extra))
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
	after := max(1, apirate.Seconds(res.RetryAfter))
	return &Problem{Type: typeRateLimited, Title: "Too many requests", Status: http.StatusTooManyRequests,
		Detail:     fmt.Sprintf("this tenant's API rate limit (bursts of %d) is used up; retry in %d s", res.Limit, after),
		RetryAfter: after}
}

// tenantRate is the tenant's own API rate, or the process's default.
func (a *API) tenantRate(ctx context.Context, id uuid.UUID) apirate.Rate {
	return a.limits.rates.get(ctx, a.store, id, a.limits.def)
}

// rateCache holds each tenant's own API rate for rateRecheck, so that a
// busy tenant costs one indexed lookup a second per process.
type rateCache struct {
	mu      sync.Mutex
	entries map[uuid.UUID]cachedRate
}

type cachedRate struct {
	rate    apirate.Rate // zero: the default
	checked time.Time
}

func (c *rateCache) get(ctx context.Context, st *store.Store, id uuid.UUID, def apirate.Rate) apirate.Rate {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if !ok || now.Sub(e.checked) >= rateRecheck {
		e = cachedRate{rate: e.rate, checked: now}
		// On a failed lookup the last known rate stands; the request
		// itself will meet the database's trouble soon enough.
		if text, err := st.TenantAPIRate(ctx, id); err == nil {
			e.rate = apirate.Rate{}
			if text != nil {
				e.rate, _ = apirate.Parse(*text) // the column's check admits only what Parse reads
			}
		}
		c.mu.Lock()
		if len(c.entries) >= maxCachedRates {
			clear(c.entries)
		}
		c.entries[id] = e
		c.mu.Unlock()
	}
	if e.rate.IsZero() {
		return def
	}
	return e.rate
}

// maxCachedRates bounds the rate cache; past it the cache starts afresh.
const maxCachedRates = 100_000
