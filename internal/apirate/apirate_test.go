package apirate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apirate"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		burst     int
		perSecond float64
	}{
		"100/s":  {200, 100},
		"6000/m": {200, 100},
		"1/s":    {2, 1},
		"30/m":   {1, 0.5},
		"1/m":    {1, 1.0 / 60},
	} {
		r, err := apirate.Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want.burst, r.Burst(), in)
		require.InDelta(t, want.perSecond, r.PerSecond(), 1e-9, in)
		require.Equal(t, in, r.String())
	}
	for _, bad := range []string{"", "100", "0/s", "-1/s", "+5/s", "5/h", "x/s", "5/", "1000000000/s"} {
		_, err := apirate.Parse(bad)
		require.Error(t, err, bad)
	}
}

// clock is a settable time for the limiter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiterTakeAndRefill(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.NewLimiter[string](c.now)
	rate := apirate.MustParse("2/s") // burst 4
	for i := range 4 {
		res := l.Take("a", rate, 1)
		require.True(t, res.Allowed, i)
		require.Equal(t, 4, res.Limit)
		require.Equal(t, 3-i, res.Remaining)
	}
	res := l.Take("a", rate, 1)
	require.False(t, res.Allowed)
	require.Equal(t, 0, res.Remaining)
	require.Equal(t, 500*time.Millisecond, res.RetryAfter)
	require.Equal(t, 2*time.Second, res.Reset)
	require.Equal(t, 1, apirate.Seconds(res.RetryAfter))

	require.True(t, l.Take("b", rate, 1).Allowed, "another key has its own bucket")

	c.advance(500 * time.Millisecond)
	require.True(t, l.Take("a", rate, 1).Allowed)
	require.False(t, l.Take("a", rate, 1).Allowed)
}

func TestLimiterChargeGoesIntoDebt(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.NewLimiter[uuid.UUID](c.now)
	id := uuid.New()
	rate := apirate.MustParse("1/s") // burst 2
	require.True(t, l.Take(id, rate, 1).Allowed)
	res := l.Charge(id, rate, 9)
	require.True(t, res.Allowed)
	require.Equal(t, 0, res.Remaining)
	require.Equal(t, 10*time.Second, res.Reset)
	c.advance(8 * time.Second)
	require.False(t, l.Take(id, rate, 1).Allowed, "8 tokens of debt to repay at 1/s")
	c.advance(time.Second)
	require.True(t, l.Take(id, rate, 1).Allowed)
}

func TestLimiterDropsFullBuckets(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.NewLimiter[int](c.now)
	rate := apirate.MustParse("10/s")
	for i := range 1000 {
		l.Take(i, rate, 1)
	}
	require.Equal(t, 1000, l.Len())
	c.advance(2 * time.Minute)
	l.Take(-1, rate, 1)
	require.Equal(t, 1, l.Len())
}

// BenchmarkLimiterTake is the limiter's cost per API request: one bucket
// per tenant, 1,000 tenants, requests from all cores.
func BenchmarkLimiterTake(b *testing.B) {
	l := apirate.NewLimiter[uuid.UUID](nil)
	rate := apirate.MustParse("1000000/s")
	ids := make([]uuid.UUID, 1000)
	for i := range ids {
		ids[i] = uuid.New()
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Take(ids[i%len(ids)], rate, 1)
			i++
		}
	})
}

func TestLimiterPeekTakesNothing(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.NewLimiter[string](c.now)
	rate := apirate.MustParse("1/s") // burst 2
	res := l.Peek("a", rate, 1)
	require.True(t, res.Allowed)
	require.Equal(t, 2, res.Remaining)
	require.Zero(t, l.Len(), "a peek keeps no bucket")
	l.Charge("a", rate, 3)
	res = l.Peek("a", rate, 1)
	require.False(t, res.Allowed)
	require.Equal(t, 2*time.Second, res.RetryAfter, "one token of debt, then one to take")
	c.advance(2 * time.Second)
	require.True(t, l.Peek("a", rate, 1).Allowed)
	require.True(t, l.Peek("a", rate, 1).Allowed, "still there: nothing was taken")
}

// rates is a RateSource of fixed rates that counts its reads.
type rates struct {
	mu    sync.Mutex
	rate  map[uuid.UUID]string
	reads int
}

func (r *rates) TenantAPIRate(_ context.Context, id uuid.UUID) (*string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if s, ok := r.rate[id]; ok {
		return &s, nil
	}
	return nil, nil
}

func TestLimitsTenantRate(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	own, other := uuid.New(), uuid.New()
	src := &rates{rate: map[uuid.UUID]string{own: "1/s"}}
	l := apirate.New(apirate.Config{Tenant: apirate.MustParse("10/s"), Rates: src, Now: c.now})
	take := func(id uuid.UUID, n int) apirate.Result {
		res, err := l.TakeTenant(t.Context(), id, n)
		require.NoError(t, err)
		return res
	}
	require.Equal(t, 2, take(own, 1).Limit, "its own rate")
	require.Equal(t, 20, take(other, 1).Limit, "the default")
	require.False(t, take(own, 2).Allowed)
	res := l.ChargeTenant(t.Context(), own, 2)
	require.True(t, res.Allowed)
	require.Equal(t, 3*time.Second, res.Reset)
	require.Equal(t, 2, src.reads, "each rate read once a second")

	src.mu.Lock()
	src.rate[own] = "100/s"
	src.mu.Unlock()
	c.advance(time.Second)
	require.Equal(t, 200, take(own, 1).Limit, "a new rate reaches the bucket within a second")
}

// TestLimitsTenantRateNoted: a rate read along with an API key
// (NoteTenantRate) is the bucket's for a second, without a read of its
// own; then the bucket reads it again.
func TestLimitsTenantRateNoted(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	own := uuid.New()
	src := &rates{rate: map[uuid.UUID]string{own: "1/s"}}
	l := apirate.New(apirate.Config{Tenant: apirate.MustParse("10/s"), Rates: src, Now: c.now})
	limit := func() int {
		res, err := l.TakeTenant(t.Context(), own, 1)
		require.NoError(t, err)
		return res.Limit
	}
	rate := "5/s"
	l.NoteTenantRate(own, &rate)
	c.advance(900 * time.Millisecond)
	require.Equal(t, 10, limit(), "the noted rate")
	require.Zero(t, src.reads, "not read again")

	c.advance(100 * time.Millisecond)
	require.Equal(t, 2, limit(), "a second after it was noted, read again")
	require.Equal(t, 1, src.reads)
	l.NoteTenantRate(own, nil)
	require.Equal(t, 20, limit(), "noted: no rate of its own, the default")
	require.Equal(t, 1, src.reads)
}

func TestLimitsSessionsAndAuth(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.New(apirate.Config{Session: apirate.MustParse("1/s").WithBurst(3), Now: c.now})
	require.True(t, l.TakeSession("cookie-a", 3).Allowed)
	require.False(t, l.TakeSession("cookie-a", 1).Allowed)
	require.True(t, l.TakeSession("cookie-b", 1).Allowed, "each session its own bucket")

	addr := netip.MustParsePrefix("198.51.100.7/32")
	for i := range 10 {
		require.True(t, l.CheckAuth(addr).Allowed, "failure %d", i)
		l.FailAuth(addr)
	}
	res := l.CheckAuth(addr)
	require.False(t, res.Allowed)
	require.Equal(t, 6, apirate.RetryAfter(res), "ten a minute: one more every 6 s")
	require.True(t, l.CheckAuth(netip.MustParsePrefix("198.51.100.8/32")).Allowed)
	c.advance(6 * time.Second)
	require.True(t, l.CheckAuth(addr).Allowed)
	l.FailAuth(addr)
	require.False(t, l.CheckAuth(addr).Allowed)
}

func TestClientPrefix(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]string{
		"198.51.100.7:4000":         "198.51.100.7/32",
		"[::ffff:198.51.100.7]:1":   "198.51.100.7/32",
		"[2001:db8:1:2::1]:4000":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::]:443": "2001:db8:1:2::/64",
		"198.51.100.7":              "198.51.100.7/32",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "203.0.113.1")
		require.Equal(t, want, apirate.ClientPrefix(r).String(), remote)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "not an address"
	require.False(t, apirate.ClientPrefix(r).IsValid())
}

func TestGateAuth(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	l := apirate.New(apirate.Config{Auth: apirate.MustParse("1/m").WithBurst(2), AuthLookup: apirate.MustParse("1/s").WithBurst(3), Now: c.now})
	addr := netip.MustParsePrefix("198.51.100.7/32")
	for range 2 {
		g, _ := l.GateAuth(addr, "guess")
		require.Equal(t, apirate.GateOpen, g)
		l.FailAuth(addr)
	}
	g, res := l.GateAuth(addr, "")
	require.Equal(t, apirate.GateShut, g, "nothing to look up")
	require.False(t, res.Allowed)
	for i := range 3 {
		g, _ := l.GateAuth(addr, "guess")
		require.Equal(t, apirate.GateLookUp, g, "failed look-up %d", i)
		l.FailLookup(addr)
	}
	g, _ = l.GateAuth(addr, "good")
	require.Equal(t, apirate.GateShut, g, "a credential not found valid lately waits with the guesses")
	l.Verified("good")
	g, _ = l.GateAuth(addr, "good")
	require.Equal(t, apirate.GateLookUp, g, "one found valid lately is looked up")
	c.advance(time.Second)
	g, _ = l.GateAuth(addr, "guess")
	require.Equal(t, apirate.GateLookUp, g, "one more look-up a second")
	c.advance(2 * time.Hour)
	g, _ = l.GateAuth(addr, "guess")
	require.Equal(t, apirate.GateOpen, g)
	l.FailAuth(addr)
	l.FailAuth(addr)
	g, _ = l.GateAuth(addr, "good")
	require.Equal(t, apirate.GateLookUp, g, "found valid an hour ago is forgotten, but look-ups have refilled")
}
