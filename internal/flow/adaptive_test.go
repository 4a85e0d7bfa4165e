package flow

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestAdaptiveLimitOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rl   sluice.RateLimit
		want AdaptiveLimit
	}{
		{sluice.RateLimit{PerSecond: 100, Burst: 100, Adaptive: true}, AdaptiveLimit{Configured: 100, Min: 1}},
		{sluice.RateLimit{PerSecond: 100, Burst: 100, Adaptive: true, Min: 5}, AdaptiveLimit{Configured: 100, Min: 5}},
		// A rate under the default floor is its own floor.
		{sluice.RateLimit{PerMinute: 30, Burst: 1, Adaptive: true}, AdaptiveLimit{Configured: 0.5, Min: 0.5}},
	} {
		require.Equal(t, tc.want, LimitOf(tc.rl), "%+v", tc.rl)
	}
}

func TestAdaptiveCurrentAndSlowdown(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l := AdaptiveLimit{Configured: 1000, Min: 10}
	for _, tc := range []struct {
		name  string
		state Adaptive
		now   time.Duration
		want  float64
	}{
		{"never slowed: the configured rate", Adaptive{}, 0, 1000},
		{"just slowed", Adaptive{Rate: 200, At: t0}, 0, 200},
		{"grows a tenth of the configured rate a second", Adaptive{Rate: 200, At: t0}, 3 * time.Second, 500},
		{"in between seconds too", Adaptive{Rate: 200, At: t0}, 1500 * time.Millisecond, 350},
		{"up to the configured rate", Adaptive{Rate: 200, At: t0}, time.Minute, 1000},
		{"a clock behind At does not shrink it", Adaptive{Rate: 200, At: t0}, -time.Second, 200},
		{"never below min (a floor raised since)", Adaptive{Rate: 2, At: t0}, 0, 10},
		{"never above the configured rate (lowered since)", Adaptive{Rate: 5000, At: t0}, 0, 1000},
	} {
		require.InDelta(t, tc.want, tc.state.Current(l, at(tc.now)), 1e-9, tc.name)
	}

	for _, tc := range []struct {
		name      string
		state     Adaptive
		sent, now time.Duration
		want      Adaptive
	}{
		{"first slowdown halves the configured rate", Adaptive{}, 0, 0,
			Adaptive{Rate: 500, At: t0, HalvedAt: t0}},
		{"halves what it had grown to", Adaptive{Rate: 200, At: t0, HalvedAt: t0}, time.Second, 2 * time.Second,
			Adaptive{Rate: 200, At: at(2 * time.Second), HalvedAt: at(2 * time.Second)}},
		{"never below min", Adaptive{Rate: 12, At: t0, HalvedAt: t0}, time.Millisecond, time.Millisecond,
			Adaptive{Rate: 10, At: at(time.Millisecond), HalvedAt: at(time.Millisecond)}},
		{"sent before the last halving: held, not halved", Adaptive{Rate: 200, At: t0, HalvedAt: t0}, 0, time.Second,
			Adaptive{Rate: 300, At: at(time.Second), HalvedAt: t0}},
	} {
		got := tc.state.Slowdown(l, at(tc.sent), at(tc.now))
		require.InDelta(t, tc.want.Rate, got.Rate, 1e-9, tc.name)
		require.Equal(t, tc.want.At, got.At, tc.name)
		require.Equal(t, tc.want.HalvedAt, got.HalvedAt, tc.name)
	}
}

// TestAdaptiveOneHalvingPerOverload: the answers to requests sent before a
// halving do not halve again, however many, but each stops the growth
// until a second without one; the first answer to a request sent at the
// lowered rate halves it again.
func TestAdaptiveOneHalvingPerOverload(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := AdaptiveLimit{Configured: 1000, Min: 1}
	sentBefore := t0.Add(-50 * time.Millisecond)
	a := Adaptive{}.Slowdown(l, sentBefore, t0)
	require.InDelta(t, 500.0, a.Rate, 1e-9)
	for i := range 9 {
		a = a.Slowdown(l, sentBefore, t0.Add(time.Duration(i+1)*100*time.Millisecond))
	}
	// A second after the halving: grown for 100 ms since the last answer only.
	require.InDelta(t, 600.0, a.Current(l, t0.Add(time.Second)), 1e-9)
	a = a.Slowdown(l, t0.Add(time.Millisecond), t0.Add(time.Second))
	require.InDelta(t, 300.0, a.Rate, 1e-9, "sent after the halving: halved")
}

func TestAdaptivePace(t *testing.T) {
	t.Parallel()
	rl := sluice.RateLimit{PerSecond: 1000, Burst: 500, Adaptive: true}
	require.Equal(t, DeliveryPace(rl), AdaptivePace(rl, 1000))
	p := AdaptivePace(rl, 100)
	require.InDelta(t, 100.0, p.PerSecond, 1e-9)
	require.InDelta(t, 50-100*Spread.Seconds(), p.Capacity, 1e-9, "the burst scales with the rate")
	p = AdaptivePace(rl, 1)
	require.InDelta(t, 1.0, p.Capacity, 1e-9, "at least one token")
}

// receiver takes perSecond requests a second, with bursts of burst, and
// answers 429 to the rest: a token bucket of its own.
type receiver struct {
	pace   Pace
	bucket Bucket
}

func (r *receiver) take(now time.Time) bool {
	r.bucket = r.bucket.Refill(r.pace, now)
	if r.bucket.Available() == 0 {
		return false
	}
	r.bucket = r.bucket.Take(1)
	return true
}

type simResult struct {
	delivered, throttled int
	settled              time.Duration // after which no one-second window delivered under 60 % of capacity or had 10 % 429s
	perSecond            []float64
}

// simulate drives an endpoint configured at rl against a receiver of
// capacity a second (bursts of capacity/10) for d, on a simulated clock in
// steps of 1 ms, as dispatch does: the sender's bucket refills at
// AdaptivePace of the current effective rate, and each answer, arriving
// latency after its request, may slow it down.
func simulate(rl sluice.RateLimit, capacity float64, latency, d time.Duration) simResult {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := LimitOf(rl)
	rcv := &receiver{pace: Pace{PerSecond: capacity, Capacity: max(1, capacity/10)}}
	var (
		a       Adaptive
		bucket  Bucket
		pending []struct {
			sent, at time.Time
			ok       bool
		}
		res           simResult
		winOK, winBad int
		lastBadWindow = -1
	)
	const step = time.Millisecond
	for i := range int(d / step) {
		now := t0.Add(time.Duration(i) * step)
		for len(pending) > 0 && !pending[0].at.After(now) {
			if !pending[0].ok && rl.Adaptive {
				a = a.Slowdown(l, pending[0].sent, now)
			}
			pending = pending[1:]
		}
		pace := AdaptivePace(rl, a.Current(l, now))
		bucket = StartEmpty(bucket, now).Refill(pace, now)
		for n := bucket.Available(); n > 0; n-- {
			ok := rcv.take(now)
			if ok {
				res.delivered++
				winOK++
			} else {
				res.throttled++
				winBad++
			}
			pending = append(pending, struct {
				sent, at time.Time
				ok       bool
			}{now, now.Add(latency), ok})
			bucket = bucket.Take(1)
		}
		if (i+1)%1000 == 0 {
			sec := (i + 1) / 1000
			res.perSecond = append(res.perSecond, float64(winOK))
			if float64(winOK) < 0.6*capacity || float64(winBad) > 0.1*float64(winOK+winBad) {
				lastBadWindow = sec
			}
			winOK, winBad = 0, 0
		}
	}
	res.settled = time.Duration(lastBadWindow) * time.Second
	return res
}

// TestAdaptiveSettlesNearCapacity is the Smart delivery claim: an endpoint
// configured at 1,000/s, adaptive, against a receiver that takes 200/s and
// answers 429 above it, delivers at least 80 % of 200/s over a minute with
// fewer than 5 % of attempts answered 429, settled within 10 s; without
// adaptive, the same endpoint is throttled most of the time instead, so
// the check can fail. (This receiver allows bursts of a tenth of a second;
// against one with none, halving at X and growing back over the next
// second averages three quarters of X, as AIMD does.)
func TestAdaptiveSettlesNearCapacity(t *testing.T) {
	t.Parallel()
	const capacity = 200.0
	for _, latency := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		rl := sluice.RateLimit{PerSecond: 1000, Burst: 1000, Adaptive: true}
		r := simulate(rl, capacity, latency, time.Minute)
		attempts := r.delivered + r.throttled
		share := float64(r.throttled) / float64(attempts)
		t.Logf("latency %s: %.1f/s delivered, %.2f %% 429, settled after %s; per second %v",
			latency, float64(r.delivered)/60, 100*share, r.settled, r.perSecond)
		require.GreaterOrEqual(t, float64(r.delivered)/60, 0.8*capacity, "latency %s", latency)
		require.Less(t, share, 0.05, "latency %s", latency)
		require.LessOrEqual(t, r.settled, 10*time.Second, "latency %s", latency)
	}
	r := simulate(sluice.RateLimit{PerSecond: 1000, Burst: 1000}, capacity, 20*time.Millisecond, time.Minute)
	require.Greater(t, float64(r.throttled)/float64(r.delivered+r.throttled), 0.5, "not adaptive: mostly 429s")
}

func TestRateCurve(t *testing.T) {
	t.Parallel()
	l := AdaptiveLimit{Configured: 100, Min: 1}
	from := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return from.Add(time.Duration(n * float64(time.Second))) }
	curve := func(ps []RatePoint) []string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%gs:%g", p.At.Sub(from).Seconds(), p.Rate))
		}
		return out
	}

	require.Equal(t, []string{"0s:100", "10s:100", "20s:100"}, curve(RateCurve(nil, l, from, sec(20), 10*time.Second)),
		"never slowed: the configured rate")

	before := []sluice.RateChange{{Rate: 20, At: sec(-3)}}
	require.Equal(t, []string{"0s:50", "5s:100", "10s:100"}, curve(RateCurve(before, l, from, sec(10), 10*time.Second)),
		"a slowdown before the range: grown by 10/s for 3 s, back at 100 at 5 s")

	one := []sluice.RateChange{{Rate: 50, At: sec(1)}}
	require.Equal(t, []string{"0s:100", "1s:100", "1s:50", "6s:100", "30s:100"}, curve(RateCurve(one, l, from, sec(30), 30*time.Second)),
		"the drop, and the recovery where it ends, not at the next step")

	two := []sluice.RateChange{{Rate: 40, At: sec(5)}, {Rate: 30, At: sec(8)}, {Rate: 60, At: sec(12)}}
	require.Equal(t, []string{"0s:100", "5s:100", "8s:30", "10s:50", "12s:70", "12s:60", "16s:100", "20s:100"},
		curve(RateCurve(two, l, from, sec(20), 10*time.Second)),
		"two slowdowns in one step: one drop, to the lowest")

	require.Equal(t, []string{"0s:100", "5s:100", "5s:40", "7s:60"}, curve(RateCurve(two[:1], l, from, sec(7), 10*time.Second)),
		"the curve ends at to")

	var often []sluice.RateChange
	for i := range 3600 {
		often = append(often, sluice.RateChange{Rate: 10, At: sec(float64(i) + 0.5)})
	}
	require.LessOrEqual(t, len(RateCurve(often, l, from, sec(3600), 30*time.Second)), 1+120*5, "at most five points a step")
}
