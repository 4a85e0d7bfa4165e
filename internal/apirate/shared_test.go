package apirate_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/dbwait"
)

// syncClock is a settable clock that goroutines share.
type syncClock struct {
	mu sync.Mutex
	t  time.Time
}

func newSyncClock() *syncClock { return &syncClock{t: time.Unix(1_000_000, 0)} }

func (c *syncClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *syncClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// row is a SharedStore in memory: the arithmetic of the LeaseAPITokens
// statement on the test's clock, with a latency (the clock moves on that
// much between sending and the grant), a failure, or a wait to impose.
type row struct {
	clock   *syncClock
	latency time.Duration

	mu       sync.Mutex
	buckets  map[uuid.UUID]*rowBucket
	calls    int
	granted  int64
	inFlight int
	most     int // calls in flight at once, at most
	err      error
	hold     chan struct{} // when set, a call waits for it (or its ctx)
	started  chan struct{} // when set, each call sends on it first
	answered chan struct{} // when set, each call sends on it after answering
}

type rowBucket struct {
	tokens float64
	at     time.Time
}

func newRow(c *syncClock) *row { return &row{clock: c, buckets: map[uuid.UUID]*rowBucket{}} }

func (r *row) LeaseAPITokens(ctx context.Context, tenant uuid.UUID, req apirate.TokenRequest, sending func()) (apirate.TokenGrant, error) {
	r.mu.Lock()
	r.calls++
	r.inFlight++
	r.most = max(r.most, r.inFlight)
	err, hold, started, answered := r.err, r.hold, r.started, r.answered
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
		if answered != nil {
			answered <- struct{}{}
		}
	}()
	if started != nil {
		started <- struct{}{}
	}
	if err != nil {
		return apirate.TokenGrant{}, err
	}
	sending()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return apirate.TokenGrant{}, ctx.Err()
		}
	}
	r.clock.advance(r.latency)
	now := r.clock.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[tenant]
	if b == nil {
		b = &rowBucket{tokens: req.Capacity, at: now}
		r.buckets[tenant] = b
	}
	level := math.Min(req.Capacity, b.tokens+req.PerSecond*math.Max(0, now.Sub(b.at).Seconds())) - float64(req.Owed)
	g := max(0, min(req.Want, int64(math.Floor(level+1e-9))))
	b.tokens, b.at = level-float64(g), now
	r.granted += g
	return apirate.TokenGrant{Granted: g, Left: b.tokens}, nil
}

func (r *row) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *row) left(tenant uuid.UUID) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buckets[tenant].tokens
}

func newShared(t *testing.T, r *row, cfg apirate.SharedConfig) *apirate.Shared {
	t.Helper()
	cfg.Store = r
	if cfg.Now == nil {
		cfg.Now = r.clock.now
	}
	s, err := apirate.NewShared(cfg)
	require.NoError(t, err)
	return s
}

// busiest is the most of the sorted times in any window [t, t + 1 s].
func busiest(times []time.Time) int {
	most, j := 0, 0
	for i := range times {
		for j < len(times) && !times[j].After(times[i].Add(time.Second)) {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// TestSharedBucketHoldsAcrossProcesses: three processes (Shared) on one
// shared bucket, at 50/s with bursts of 100, each with clients asking
// every millisecond for 10 s, as many as the seed says (leases asked
// ahead are answered a moment later, when the goroutine runs). No window of one second (closed: both
// ends count) holds more than burst + rate accepted requests, and after
// the first burst at least 95% of the rate is accepted. With three
// in-memory buckets the busiest second holds 450.
func TestSharedBucketHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	rate := apirate.MustParse("50/s") // burst 100
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := newSyncClock()
		r := newRow(c)
		procs := make([]*apirate.Shared, 3)
		clients := make([]int, 3)
		for i := range procs {
			procs[i] = newShared(t, r, apirate.SharedConfig{})
			clients[i] = 1 + rng.IntN(8)
		}
		tenant := uuid.New()
		var accepted []time.Time
		start := c.now()
		for c.now().Sub(start) < 10*time.Second {
			for i, p := range procs {
				for range clients[i] {
					res, err := p.Take(t.Context(), tenant, rate, 1)
					require.NoError(t, err)
					if res.Allowed {
						accepted = append(accepted, c.now())
					}
				}
			}
			c.advance(time.Millisecond)
		}
		sort.Slice(accepted, func(i, j int) bool { return accepted[i].Before(accepted[j]) })
		most := busiest(accepted)
		span := c.now().Sub(start).Seconds()
		achieved := float64(len(accepted)-rate.Burst()) / span
		t.Logf("seed %d: clients %v: busiest second %d, %.1f/s after the burst, %d statements",
			seed, clients, most, achieved, r.callCount())
		require.LessOrEqual(t, most, rate.Burst()+50, "seed %d: busiest second", seed)
		require.GreaterOrEqual(t, achieved, 0.95*50, "seed %d: the rate is served", seed)
	}
}

// TestSharedBucketBoundUnderBursts: requests come in random bursts to
// random processes, with idle gaps that let leases expire unspent and the
// bucket fill. The bound holds in every window whatever the pattern.
func TestSharedBucketBoundUnderBursts(t *testing.T) {
	t.Parallel()
	rate := apirate.MustParse("20/s") // burst 40
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 2))
		c := newSyncClock()
		r := newRow(c)
		procs := []*apirate.Shared{
			newShared(t, r, apirate.SharedConfig{}),
			newShared(t, r, apirate.SharedConfig{}),
			newShared(t, r, apirate.SharedConfig{}),
		}
		tenant := uuid.New()
		var accepted []time.Time
		start := c.now()
		for c.now().Sub(start) < 20*time.Second {
			p := procs[rng.IntN(len(procs))]
			for range rng.IntN(30) {
				res, err := p.Take(t.Context(), tenant, rate, 1)
				require.NoError(t, err)
				if res.Allowed {
					accepted = append(accepted, c.now())
				}
				c.advance(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
			c.advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		sort.Slice(accepted, func(i, j int) bool { return accepted[i].Before(accepted[j]) })
		most := busiest(accepted)
		t.Logf("seed %d: %d accepted, busiest second %d", seed, len(accepted), most)
		require.LessOrEqual(t, most, rate.Burst()+20, "seed %d", seed)
	}
}

// TestSharedLeaseExpires: a process leases several tokens at a time; what
// it has not spent when the lease's TTL is up is dropped, never spent
// later, and the shared bucket does not get it back.
func TestSharedLeaseExpires(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("100/s") // shared: 180 tokens
	tenant := uuid.New()
	for range 40 { // 200/s asked: leases grow to 20
		res, err := s.Take(t.Context(), tenant, rate, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	settle(t, s)
	require.Less(t, r.callCount(), 40, "leases of several tokens")
	spare := s.Local(tenant)
	require.Positive(t, spare, "the last lease has tokens to spare")
	r.mu.Lock()
	granted := r.granted
	r.mu.Unlock()
	left := r.left(tenant)

	c.advance(200 * time.Millisecond) // every lease expires
	res, err := s.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	settle(t, s)
	r.mu.Lock()
	fresh := r.granted - granted
	r.mu.Unlock()
	require.Greater(t, fresh, int64(1), "a new lease")
	require.Equal(t, fresh-1, s.Local(tenant), "the expired tokens are gone")
	require.InDelta(t, left+100*0.2-float64(fresh), r.left(tenant), 1e-6,
		"the shared bucket refilled at its rate, and got nothing back")
}

// settle waits until no call of s is under way.
func settle(t *testing.T, s *apirate.Shared) {
	t.Helper()
	require.Eventually(t, s.Idle, 10*time.Second, time.Millisecond, "calls under way end")
}

// TestSharedOneCallForManyRequests: requests of one tenant that find no
// leased token while a call is under way wait for that call instead of
// making their own.
func TestSharedOneCallForManyRequests(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	r.hold = make(chan struct{})
	r.started = make(chan struct{}, 100)
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("1000/s")
	tenant := uuid.New()
	const n = 20
	results := make(chan apirate.Result, n)
	for range n {
		go func() {
			res, err := s.Take(t.Context(), tenant, rate, 1)
			assert(t, err == nil, "take: %v", err)
			results <- res
		}()
	}
	<-r.started // the first call is under way, held
	require.Eventually(t, func() bool { return s.Asked(tenant) == n }, 10*time.Second, time.Millisecond,
		"every request has asked")
	close(r.hold)
	for range n {
		require.True(t, (<-results).Allowed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Equal(t, 1, r.most, "never two calls of one tenant at once")
	require.Less(t, r.calls, n, "fewer calls than requests")
}

// assert is require for goroutines other than the test's.
func assert(t *testing.T, ok bool, msg string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(msg, args...)
	}
}

// TestSharedRefusesWithoutAsking: once the shared bucket has answered that
// it holds too little, the process refuses by itself until the bucket will
// hold a lease's worth, with a Retry-After that says so, and then asks
// again.
func TestSharedRefusesWithoutAsking(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("10/s") // shared: 18 tokens, leases of 1
	tenant := uuid.New()
	for i := range 18 {
		res, err := s.Take(t.Context(), tenant, rate, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed, i)
		require.Equal(t, 20, res.Limit, "the tenant's burst")
	}
	res, err := s.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Equal(t, 0, res.Remaining)
	require.Equal(t, 100*time.Millisecond, res.RetryAfter, "one token at 10/s")
	calls := r.callCount()
	for range 50 {
		res, err := s.Take(t.Context(), tenant, rate, 1)
		require.NoError(t, err)
		require.False(t, res.Allowed)
	}
	require.Equal(t, calls, r.callCount(), "refused without a statement each")
	c.advance(100 * time.Millisecond)
	res, err = s.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, calls+1, r.callCount())
}

// TestSharedNewRateEndsTheWait: a tenant refused at a slow rate is served
// at its new rate as soon as that rate has refilled a token, not when the
// old rate would have.
func TestSharedNewRateEndsTheWait(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	s := newShared(t, r, apirate.SharedConfig{})
	tenant := uuid.New()
	slow := apirate.MustParse("1/m") // burst 1
	res, err := s.Take(t.Context(), tenant, slow, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	res, err = s.Take(t.Context(), tenant, slow, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Greater(t, res.RetryAfter, time.Minute, "one token at 1/m, a little slower shared")

	fast := apirate.MustParse("100/s")
	res, err = s.Take(t.Context(), tenant, fast, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the bucket is as empty as it was")
	require.LessOrEqual(t, res.RetryAfter, 20*time.Millisecond, "but refills at the new rate (a lease of 2)")
	c.advance(res.RetryAfter)
	res, err = s.Take(t.Context(), tenant, fast, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
}

// TestSharedHeaders: Remaining is the shared bucket's tokens as of its
// last answer plus the leased ones; Reset is when the shared bucket is
// full again.
func TestSharedHeaders(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("10/s") // shared: 18 tokens
	tenant := uuid.New()
	res, err := s.Take(t.Context(), tenant, rate, 1) // a lease of 1, spent
	require.NoError(t, err)
	require.Equal(t, 17, res.Remaining)
	require.Equal(t, 100*time.Millisecond, res.Reset)
	// Another process takes 10, and leases some more.
	other := newShared(t, r, apirate.SharedConfig{})
	for range 10 {
		_, err := other.Take(t.Context(), tenant, rate, 1)
		require.NoError(t, err)
	}
	settle(t, other)
	res, err = s.Take(t.Context(), tenant, rate, 1) // another lease of 1, spent
	require.NoError(t, err)
	left := r.left(tenant)
	require.Less(t, left, 7.0)
	require.Equal(t, int(left), res.Remaining, "as the shared bucket last said")
	require.InDelta(t, (18-left)/10*float64(time.Second), float64(res.Reset), 1)
}

// TestSharedChargeGoesIntoDebt: a charge takes from the leased tokens, and
// the rest from the shared bucket at once, in the background, so that the
// other processes see the debt too.
func TestSharedChargeGoesIntoDebt(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("1/s") // shared: 1.8 tokens
	tenant := uuid.New()
	res, err := s.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	r.mu.Lock()
	r.answered = make(chan struct{}, 10)
	r.mu.Unlock()
	res = s.Charge(t.Context(), tenant, rate, 9)
	require.True(t, res.Allowed)
	require.Equal(t, 0, res.Remaining)
	<-r.answered // the debt reached the shared bucket
	require.InDelta(t, 0.8-9, r.left(tenant), 1e-9)

	other := newShared(t, r, apirate.SharedConfig{})
	c.advance(8 * time.Second)
	res, err = other.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the other process meets the debt")
	c.advance(2 * time.Second)
	res, err = other.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
}

// TestSharedDatabaseDown: a failed call fails the requests that waited for
// it with its error, and for a moment after the tenant's requests fail at
// once, without a statement each; then the process asks again.
func TestSharedDatabaseDown(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	down := errors.New("connection refused")
	r.err = down
	s := newShared(t, r, apirate.SharedConfig{})
	rate := apirate.MustParse("10/s")
	tenant := uuid.New()
	res, err := s.Take(t.Context(), tenant, rate, 1)
	require.ErrorIs(t, err, down)
	require.False(t, res.Allowed)
	require.Equal(t, 20, res.Limit, "the headers still say what is known")
	for range 10 {
		_, err := s.Take(t.Context(), tenant, rate, 1)
		require.ErrorIs(t, err, down)
	}
	require.Equal(t, 1, r.callCount(), "failing at once")
	r.mu.Lock()
	r.err = nil
	r.mu.Unlock()
	c.advance(500 * time.Millisecond)
	res, err = s.Take(t.Context(), tenant, rate, 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
}

// TestSharedWaitIsBounded: a database that does not answer holds a request
// no longer than the limiter's timeout, nor than the request's own
// database budget (dbwait), which the wait counts toward.
func TestSharedWaitIsBounded(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	r.hold = make(chan struct{}) // the database does not answer until the test ends
	t.Cleanup(func() { close(r.hold) })
	s := newShared(t, r, apirate.SharedConfig{Timeout: 50 * time.Millisecond})
	rate := apirate.MustParse("10/s")
	_, err := s.Take(t.Context(), uuid.New(), rate, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	s = newShared(t, r, apirate.SharedConfig{Timeout: time.Hour})
	ctx, stop := dbwait.WithBudget(t.Context(), 50*time.Millisecond)
	defer stop()
	_, err = s.Take(ctx, uuid.New(), rate, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, dbwait.Exceeded(ctx), "the request's budget ran out")
}

// TestSharedLateLeaseIsVoid: tokens granted by an answer that came after
// the lease's TTL are never spent.
func TestSharedLateLeaseIsVoid(t *testing.T) {
	t.Parallel()
	c := newSyncClock()
	r := newRow(c)
	r.latency = 250 * time.Millisecond // beyond the TTL of 200 ms
	s := newShared(t, r, apirate.SharedConfig{Timeout: 100 * time.Millisecond})
	rate := apirate.MustParse("10/s")
	tenant := uuid.New()
	res, err := s.Take(t.Context(), tenant, rate, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no lease came in time")
	require.False(t, res.Allowed)
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Positive(t, r.granted, "tokens were granted, too late")
}

func TestNewSharedValidates(t *testing.T) {
	t.Parallel()
	_, err := apirate.NewShared(apirate.SharedConfig{})
	require.Error(t, err, "no store")
	_, err = apirate.NewShared(apirate.SharedConfig{Store: newRow(newSyncClock()), LeaseTTL: 2 * time.Second})
	require.Error(t, err)
}
