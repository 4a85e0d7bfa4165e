package apirate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/flow"
)

func TestSharedPace(t *testing.T) {
	t.Parallel()
	ttl := 200 * time.Millisecond
	for _, tc := range []struct {
		rate       Rate
		perSecond  float64
		capacity   float64
		descriptor string
	}{
		{MustParse("50/s"), 50, 90, "burst 100 less 50/s × 200ms"},
		{MustParse("100/s"), 100, 180, "the default"},
		{MustParse("1/s"), 1, 1.8, "burst 2"},
		// burst 1, 1/60 a second: 1 − 1/300 < 1, so the capacity is 1 and
		// the rate gives way: (1 + 1/60 − 1) / 1.2.
		{MustParse("1/m"), 1.0 / 60 / 1.2, 1, "a burst too small to share"},
		{MustParse("10/s").WithBurst(2), (2 + 10 - 1) / 1.2, 1, "a burst under rate × TTL + 1"},
	} {
		p := sharedPace(tc.rate, ttl)
		require.InDelta(t, tc.perSecond, p.PerSecond, 1e-9, tc.descriptor)
		require.InDelta(t, tc.capacity, p.Capacity, 1e-9, tc.descriptor)
		// The bound of Shared: the most granted in 1 s + TTL is burst + rate.
		require.InDelta(t, float64(tc.rate.Burst())+tc.rate.PerSecond(),
			p.Capacity+p.PerSecond*(1+ttl.Seconds()), 1e-9, tc.descriptor)
	}
}

func TestChunk(t *testing.T) {
	t.Parallel()
	ttl := 200 * time.Millisecond
	p := flow.Pace{PerSecond: 100, Capacity: 180}
	require.EqualValues(t, 1, chunk(0, p, ttl), "no demand yet: one token")
	require.EqualValues(t, 1, chunk(10, p, ttl), "10/s asks one token per 100 ms")
	require.EqualValues(t, 3, chunk(25, p, ttl), "25/s: 2.5 tokens in 100 ms, rounded up")
	require.EqualValues(t, 50, chunk(500, p, ttl), "more than the rate: what arrives in half a TTL")
	require.EqualValues(t, 180, chunk(5000, p, ttl), "at most what the bucket holds")
	require.EqualValues(t, 1, chunk(5000, flow.Pace{PerSecond: 1, Capacity: 1.8}, ttl), "at least one")

	require.InDelta(t, 10, worth(p, ttl), 1e-9, "a refused process waits for 100 ms of the rate")
	require.InDelta(t, 1, worth(flow.Pace{PerSecond: 1, Capacity: 1.8}, ttl), 1e-9, "or one token")
	require.InDelta(t, 2, worth(flow.Pace{PerSecond: 1000, Capacity: 2}, ttl), 1e-9, "or the capacity")
}

func TestSharedTenantDemand(t *testing.T) {
	t.Parallel()
	ttl := 200 * time.Millisecond
	t0 := time.Unix(1_000_000, 0)
	st := &sharedTenant{window: t0}
	for range 20 {
		st.ask(t0, 1, ttl)
	}
	require.InDelta(t, 100, st.demand(t0, ttl), 1e-9, "20 tokens in the window now: 100/s")
	require.InDelta(t, 50, st.demand(t0.Add(300*time.Millisecond), ttl), 1e-9,
		"half way through the next window, half of the last one counts")
	require.InDelta(t, 0, st.demand(t0.Add(time.Second), ttl), 1e-9, "forgotten after two windows")
}

func TestSharedTenantLeases(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	st := &sharedTenant{leases: []lease{
		{tokens: 2, expires: t0.Add(100 * time.Millisecond)},
		{tokens: 3, expires: t0.Add(200 * time.Millisecond)},
	}}
	require.False(t, st.spend(6, t0), "5 leased: 6 are not there")
	require.EqualValues(t, 5, st.local(), "and none was taken")
	require.True(t, st.spend(3, t0))
	require.Equal(t, []lease{{tokens: 2, expires: t0.Add(200 * time.Millisecond)}}, st.leases,
		"the tokens expiring first went first")
	require.EqualValues(t, 2, st.spendUpTo(5, t0.Add(199*time.Millisecond)), "a charge takes what there is")
	st.leases = []lease{{tokens: 4, expires: t0.Add(200 * time.Millisecond)}}
	require.False(t, st.spend(1, t0.Add(200*time.Millisecond)), "at its expiry a lease is gone")
	require.Empty(t, st.leases)
}
