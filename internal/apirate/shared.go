package apirate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// Shared are the tenants' Buckets kept in Postgres, one bucket per tenant
// shared by every process, so that a tenant's limit holds however many
// processes serve it. A process does not ask the database for every
// request: it leases a few tokens at a time and spends them itself.
//
// Why the limit holds. Let b be the tenant's burst, r its rate and d the
// lease TTL. The shared bucket has capacity C = b − r·d and refills at r
// (sharedPace), so the tokens it grants in any interval of length L are at
// most C + r·L, whichever process asks. A process starts a lease's clock
// at s, before it sends the statement that grants the tokens at some
// g ≥ s, and spends them only before s + d; unspent ones are dropped,
// never returned or carried. So a token spent at time a was granted in
// [a − d, a], and the requests accepted in any window [t, t + 1 s] spent
// tokens granted in [t − d, t + 1 s]: at most C + r·(1 s + d) = b + r of
// them. When b − r·d < 1, C is 1 and the rate (b + r − 1)/(1 s + d),
// which keeps the sum. TestSharedBucketHoldsAcrossProcesses holds this
// on an injected clock, TestAPIRateLimitHoldsAcrossAPIProcesses (package
// app) across real processes.
//
// What it costs. A lease is sized to what the process was asked of the
// tenant's bucket lately, to last about d/2 (chunk), so a busy tenant
// costs each process about 2/d statements a second, a quiet one one per
// request it makes, and few leased tokens expire unspent. The next lease
// is asked for while the last one still has tokens (prefetch), and
// requests that find no tokens while a lease is being asked for wait for
// that one call. When the shared bucket could not grant all that was
// asked, the process answers 429 by itself until the bucket will hold
// what the rate refills in d/2 again (worth).
//
// When the database fails, a request that finds no leased token is
// answered with the error (the API answers 503, with Retry-After): every
// request needs the database anyway, and admitting requests unmetered
// would drop the bound. The wait for a lease counts toward the request's
// database budget (dbwait) and is bounded by SharedConfig.Timeout besides;
// after a failed call the tenant's requests on this process fail at once
// for downFor, instead of each waiting out the bound.
type Shared struct {
	cfg SharedConfig

	mu      sync.Mutex
	tenants map[uuid.UUID]*sharedTenant
	swept   time.Time
}

// DefaultLeaseTTL is how long leased tokens may be spent. The burst of the
// shared bucket is smaller than the tenant's by rate × the TTL; a shorter
// TTL costs more statements (about 2/TTL a second per busy tenant and
// process).
const DefaultLeaseTTL = 200 * time.Millisecond

// downFor is how long, after a call on the shared bucket failed, requests
// of the tenant that find no leased token fail at once with its error.
const downFor = 500 * time.Millisecond

// SharedStore keeps the shared buckets; Database is the database's.
type SharedStore interface {
	// LeaseAPITokens takes req.Owed tokens from the tenant's bucket and
	// grants up to req.Want whole ones of what it holds then, in one
	// atomic step, refilling it first at req.PerSecond up to req.Capacity
	// (a tenant's first call makes it, full). It calls sending, once,
	// before it sends what grants the tokens.
	LeaseAPITokens(ctx context.Context, tenant uuid.UUID, req TokenRequest, sending func()) (TokenGrant, error)
}

// TokenRequest is a call on a tenant's shared bucket.
type TokenRequest struct {
	// Want is the most whole tokens to grant.
	Want int64
	// Owed is taken whatever the bucket holds: charges made since the
	// last call (Charge). It may leave the bucket in debt.
	Owed int64
	// Capacity and PerSecond are the bucket's pace (sharedPace).
	Capacity  float64
	PerSecond float64
}

// TokenGrant is a shared bucket's answer.
type TokenGrant struct {
	// Granted is the whole tokens granted.
	Granted int64
	// Left is the tokens left in the bucket (below 0 in debt).
	Left float64
}

// SharedConfig configures Shared.
type SharedConfig struct {
	// Store keeps the buckets; required.
	Store SharedStore
	// LeaseTTL is how long leased tokens may be spent; zero means
	// DefaultLeaseTTL. At most a second.
	LeaseTTL time.Duration
	// Timeout bounds a request's wait for a lease, and each call on the
	// database; zero means dbwait.DefaultTimeout (the API's
	// SLUICE_DB_TIMEOUT).
	Timeout time.Duration
	// Now is the clock of the leases; nil means time.Now.
	Now func() time.Time
}

func (c SharedConfig) resolve() (SharedConfig, error) {
	if c.Store == nil {
		return c, errors.New("apirate: SharedConfig.Store is required")
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < 0 || c.LeaseTTL > time.Second {
		return c, fmt.Errorf("apirate: lease TTL %s is not within (0, 1s]", c.LeaseTTL)
	}
	if c.Timeout == 0 {
		c.Timeout = dbwait.DefaultTimeout
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("apirate: timeout %s is negative", c.Timeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// NewShared returns Shared buckets on cfg.Store.
func NewShared(cfg SharedConfig) (*Shared, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Shared{cfg: cfg, tenants: map[uuid.UUID]*sharedTenant{}}, nil
}

// sharedPace is the pace of the shared bucket of a tenant at rate, with
// leases of the TTL d: capacity burst − rate·d, or 1 and a rate lowered
// to keep capacity + rate·(1 s + d) at burst + rate (see Shared).
func sharedPace(rate Rate, d time.Duration) flow.Pace {
	r, b, ds := rate.PerSecond(), float64(rate.Burst()), d.Seconds()
	if c := b - r*ds; c >= 1 {
		return flow.Pace{PerSecond: r, Capacity: c}
	}
	return flow.Pace{PerSecond: (b + r - 1) / (1 + ds), Capacity: 1}
}

// sharedTenant is what this process holds of one tenant's shared bucket.
type sharedTenant struct {
	leases []lease // unexpired or not yet dropped, oldest first
	owed   int64   // charged, not yet taken from the shared bucket

	// left is the shared bucket's tokens as of its last answer, at
	// answered (this process's clock).
	left     float64
	answered time.Time

	// emptyUntil: the shared bucket could not grant what was asked; until
	// then a request that finds no leased token is refused without asking,
	// unless the tenant's rate changes (pace is the last one seen).
	emptyUntil time.Time
	pace       flow.Pace
	// downUntil, downErr: the last call failed; until then a request that
	// finds no leased token fails with downErr.
	downUntil time.Time
	downErr   error

	call *leaseCall // in flight, or nil

	// Demand: tokens asked for in the current window of one TTL (from
	// window) and in the one before it.
	window      time.Time
	cur, prev   int64
	lastTouched time.Time
}

// lease is tokens granted to this process, to spend before expires.
type lease struct {
	tokens  int64
	expires time.Time
}

// leaseCall is a call on the shared bucket; done closes when it ends.
type leaseCall struct {
	done chan struct{}
	err  error
}

// Take takes n tokens from the tenant's shared bucket if it holds them.
// It waits (at most for ctx, and cfg.Timeout) only when this process
// holds too few leased tokens and must ask for more.
func (s *Shared) Take(ctx context.Context, tenant uuid.UUID, rate Rate, n int) (Result, error) {
	p := sharedPace(rate, s.cfg.LeaseTTL)
	res, c, err := s.try(tenant, rate, p, n, true)
	if c == nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	for {
		waited := dbwait.Wait(ctx)
		select {
		case <-c.done:
			waited()
		case <-ctx.Done():
			waited()
			s.mu.Lock()
			res := s.tenant(tenant, p, s.cfg.Now()).result(false, n, rate, p, s.cfg.Now())
			s.mu.Unlock()
			return res, fmt.Errorf("wait for api tokens: %w", ctx.Err())
		}
		if c.err != nil {
			s.mu.Lock()
			res := s.tenant(tenant, p, s.cfg.Now()).result(false, n, rate, p, s.cfg.Now())
			s.mu.Unlock()
			return res, fmt.Errorf("take api tokens: %w", c.err)
		}
		if res, c, err = s.try(tenant, rate, p, n, false); c == nil {
			return res, err
		}
	}
}

// try takes n leased tokens, or answers without them (refused, or the
// error of a failed call), or answers the call to wait for (under way, or
// started for this request); first counts the request in the demand.
func (s *Shared) try(tenant uuid.UUID, rate Rate, p flow.Pace, n int, first bool) (Result, *leaseCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	t := s.tenant(tenant, p, now)
	if first {
		t.ask(now, int64(n), s.cfg.LeaseTTL)
	}
	if t.spend(int64(n), now) {
		s.prefetch(tenant, t, p, now)
		return t.result(true, n, rate, p, now), nil, nil
	}
	if t.call != nil {
		return Result{}, t.call, nil
	}
	switch {
	case now.Before(t.downUntil):
		return t.result(false, n, rate, p, now), nil, fmt.Errorf("take api tokens: %w", t.downErr)
	case now.Before(t.emptyUntil):
		return t.result(false, n, rate, p, now), nil, nil
	}
	return Result{}, s.startCall(tenant, t, p, int64(n)-t.local(), now), nil
}

// Charge takes n tokens whether or not the bucket holds them: from this
// process's leased tokens first, and the rest from the shared bucket, in
// the background (Limiter.Charge).
func (s *Shared) Charge(_ context.Context, tenant uuid.UUID, rate Rate, n int) Result {
	p := sharedPace(rate, s.cfg.LeaseTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	t := s.tenant(tenant, p, now)
	t.owed += int64(n) - t.spendUpTo(int64(n), now)
	if t.owed > 0 && t.call == nil && !now.Before(t.downUntil) {
		s.startCall(tenant, t, p, 0, now)
	}
	return t.result(true, n, rate, p, now)
}

// startCall starts a call on the tenant's shared bucket for at least need
// tokens (a lease of chunk tokens if more), paying what is owed; s.mu is
// held.
func (s *Shared) startCall(tenant uuid.UUID, t *sharedTenant, p flow.Pace, need int64, now time.Time) *leaseCall {
	want := int64(0)
	if need > 0 {
		want = max(need, chunk(t.demand(now, s.cfg.LeaseTTL), p, s.cfg.LeaseTTL))
	}
	req := TokenRequest{Want: want, Owed: t.owed, Capacity: p.Capacity, PerSecond: p.PerSecond}
	c := &leaseCall{done: make(chan struct{})}
	t.call = c
	go s.lease(tenant, t, c, p, req)
	return c
}

// prefetch asks for the next lease while the tenant's leased tokens last
// another half lease or less, so that its requests seldom wait for one;
// s.mu is held. Leases of one token are not asked ahead: their demand is
// too slow to wait often, and a token asked ahead would mostly expire.
func (s *Shared) prefetch(tenant uuid.UUID, t *sharedTenant, p flow.Pace, now time.Time) {
	if t.call != nil || now.Before(t.emptyUntil) || now.Before(t.downUntil) {
		return
	}
	if k := chunk(t.demand(now, s.cfg.LeaseTTL), p, s.cfg.LeaseTTL); k > 1 && t.local() <= k/2 {
		s.startCall(tenant, t, p, 1, now)
	}
}

// lease makes the call c and records its answer.
func (s *Shared) lease(tenant uuid.UUID, t *sharedTenant, c *leaseCall, p flow.Pace, req TokenRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	var (
		sent  time.Time
		grant TokenGrant
	)
	// A call the database could not serve (its connection cut by a
	// leader's shutdown, no server taking writes during a switchover) is
	// made again within the timeout, as a post's commit is: paying what is
	// owed twice would only slow the tenant a little.
	err := dbwait.Retry(ctx, sluice.Unavailable, func(ctx context.Context) error {
		var err error
		grant, err = s.cfg.Store.LeaseAPITokens(ctx, tenant, req, func() { sent = s.cfg.Now() })
		return err
	})
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	t.call = nil
	defer close(c.done)
	if err != nil {
		// What was owed stays owed: paying it twice, had the statement
		// taken effect after all, would only slow the tenant a little.
		c.err = err
		t.downUntil, t.downErr = now.Add(downFor), err
		return
	}
	t.owed -= req.Owed
	t.left, t.answered = grant.Left, now
	// The tokens were granted after sent: spent before sent + TTL, they
	// are spent within the TTL of their grant.
	if expires := sent.Add(s.cfg.LeaseTTL); grant.Granted > 0 && now.Before(expires) {
		t.leases = append(t.leases, lease{tokens: grant.Granted, expires: expires})
	}
	if grant.Granted < req.Want {
		// Too few to lease: ask again once a lease's worth is there.
		missing := min(float64(req.Want), worth(p, s.cfg.LeaseTTL)) - grant.Left
		t.emptyUntil = now.Add(seconds(missing / p.PerSecond))
	}
	if t.owed > 0 {
		s.startCall(tenant, t, p, 0, now) // charged meanwhile
	}
}

// chunk is how many tokens to lease: what the demand (tokens a second)
// asks for in half a TTL, at least 1 and at most what the shared bucket
// holds. The demand counts every request that arrives, so the lease is
// mostly spent before it expires, however large: a process with many
// requests waiting takes a whole burst at once, one with few takes few.
func chunk(demand float64, p flow.Pace, ttl time.Duration) int64 {
	half := ttl.Seconds() / 2
	return int64(min(max(1, math.Floor(p.Capacity)), max(1, math.Ceil(demand*half-1e-9))))
}

// worth is a lease's worth for a refused process to wait for: what the
// rate refills in half a TTL (at least 1, at most the capacity), so that a
// tenant over its limit costs each process about 2/TTL statements a
// second, not one per token.
func worth(p flow.Pace, ttl time.Duration) float64 {
	return max(1, min(math.Floor(p.PerSecond*ttl.Seconds()/2), math.Floor(p.Capacity)))
}

// tenant is the tenant's state, made on first use; s.mu is held. Now and
// then it drops the state of tenants idle for a while (whose leases have
// expired, with nothing owed).
func (s *Shared) tenant(id uuid.UUID, p flow.Pace, now time.Time) *sharedTenant {
	if now.Sub(s.swept) >= sweepEvery {
		s.swept = now
		for k, t := range s.tenants {
			if t.call == nil && t.owed == 0 && now.Sub(t.lastTouched) >= sweepEvery {
				delete(s.tenants, k)
			}
		}
	}
	t := s.tenants[id]
	if t == nil {
		t = &sharedTenant{left: p.Capacity, answered: now, window: now, pace: p}
		s.tenants[id] = t
	}
	if t.pace != p {
		// A new rate (tenant set-rate): the wait for the old one is void.
		t.pace, t.emptyUntil = p, time.Time{}
	}
	t.lastTouched = now
	return t
}

// ask counts n tokens asked for at now.
func (t *sharedTenant) ask(now time.Time, n int64, ttl time.Duration) {
	t.roll(now, ttl)
	t.cur += n
}

// roll moves the demand windows on to now.
func (t *sharedTenant) roll(now time.Time, ttl time.Duration) {
	switch el := now.Sub(t.window); {
	case el >= 2*ttl:
		t.window, t.prev, t.cur = now, 0, 0
	case el >= ttl:
		t.window, t.prev, t.cur = t.window.Add(ttl), t.cur, 0
	}
}

// demand is the tokens a second asked for lately: a sliding window of one
// TTL, made of the current window and a share of the one before.
func (t *sharedTenant) demand(now time.Time, ttl time.Duration) float64 {
	t.roll(now, ttl)
	gone := min(1, max(0, now.Sub(t.window).Seconds()/ttl.Seconds()))
	return (float64(t.prev)*(1-gone) + float64(t.cur)) / ttl.Seconds()
}

// expire drops the leases expired at now.
func (t *sharedTenant) expire(now time.Time) {
	i := 0
	for i < len(t.leases) && !now.Before(t.leases[i].expires) {
		i++
	}
	t.leases = t.leases[i:]
}

// local is the leased tokens not yet spent (expire first).
func (t *sharedTenant) local() int64 {
	var n int64
	for _, l := range t.leases {
		n += l.tokens
	}
	return n
}

// spend takes n leased tokens if there are that many unexpired, and
// nothing otherwise.
func (t *sharedTenant) spend(n int64, now time.Time) bool {
	t.expire(now)
	if t.local() < n {
		return false
	}
	t.spendUpTo(n, now)
	return true
}

// spendUpTo takes up to n leased tokens, those expiring first first, and
// answers how many it took.
func (t *sharedTenant) spendUpTo(n int64, now time.Time) int64 {
	t.expire(now)
	took := int64(0)
	for took < n && len(t.leases) > 0 {
		l := &t.leases[0]
		k := min(l.tokens, n-took)
		l.tokens -= k
		took += k
		if l.tokens == 0 {
			t.leases = t.leases[1:]
		}
	}
	return took
}

// result is the Result of a request for n tokens: Remaining is the shared
// bucket's tokens as of its last answer, less what is owed, plus the
// leased ones; Reset and RetryAfter are counted from that answer.
func (t *sharedTenant) result(allowed bool, n int, rate Rate, p flow.Pace, now time.Time) Result {
	t.expire(now)
	local := t.local()
	left := t.left - float64(t.owed)
	since := now.Sub(t.answered).Seconds()
	res := Result{
		Allowed:   allowed,
		Limit:     rate.Burst(),
		Remaining: int(min(int64(rate.Burst()), max(0, int64(math.Floor(left+1e-9))+local))),
		Reset:     seconds((p.Capacity-left)/p.PerSecond - since),
	}
	if !allowed {
		res.RetryAfter = max(t.emptyUntil.Sub(now), seconds((float64(int64(n)-local)-left)/p.PerSecond-since))
	}
	return res
}

// Len is the number of tenants held, for tests.
func (s *Shared) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tenants)
}
