package dispatch

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// The unit tests of one dispatch step's decisions: pure functions of
// values on a fixed clock, with no database and no sleeping
// (go test ./internal/dispatch -run Unit).

// clock is the tests' now.
var clock = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// openBreaker is a circuit opened at clock, its next probe after probeIn.
func openBreaker(probeIn time.Duration) flow.Breaker {
	opened, next := clock, clock.Add(probeIn)
	return flow.Breaker{State: sluice.CircuitOpen, Failures: 5, OpenedAt: &opened, NextProbeAt: &next,
		ProbeInterval: probeIn, LastError: "status 500"}
}

func TestUnitPlanClaim(t *testing.T) {
	t.Parallel()
	healthy := Target{MaxInFlight: 7}

	t.Run("max_in_flight", func(t *testing.T) {
		p := planClaim(healthy, clock)
		require.Equal(t, 7, p.n)
		require.False(t, p.blocked())
		require.Equal(t, healthy.Flow, p.claimed(nil, 7), "nothing to save for a healthy endpoint")
	})
	t.Run("disabled", func(t *testing.T) {
		p := planClaim(Target{MaxInFlight: 7, Disabled: true}, clock)
		require.Zero(t, p.n)
		require.False(t, p.blocked())
	})
	t.Run("throttled", func(t *testing.T) {
		tg := healthy
		tg.Flow.Throttle = flow.Throttle{Until: clock.Add(time.Minute), Count: 2}
		p := planClaim(tg, clock)
		require.Zero(t, p.n)
		require.True(t, p.blocked())
		require.Equal(t, time.Minute, p.wait(clock))
		require.Equal(t, tg.Flow, p.claimed(nil, 0), "a throttle is left as it is")
	})
	t.Run("throttle lifted: one request first", func(t *testing.T) {
		tg := healthy
		tg.Flow.Throttle = flow.Throttle{Until: clock.Add(-time.Second), Count: 2}
		p := planClaim(tg, clock)
		require.Equal(t, 1, p.n)
		require.False(t, p.probe)
	})
	t.Run("circuit open", func(t *testing.T) {
		tg := healthy
		tg.Flow.Breaker = openBreaker(time.Minute)
		p := planClaim(tg, clock.Add(10*time.Second))
		require.Zero(t, p.n)
		require.Equal(t, clock.Add(time.Minute), p.blockedUntil)
		require.Equal(t, 50*time.Second, p.wait(clock.Add(10*time.Second)))
	})
	t.Run("circuit probe", func(t *testing.T) {
		tg := healthy
		tg.Flow.Breaker = openBreaker(time.Minute)
		p := planClaim(tg, clock.Add(time.Minute))
		require.Equal(t, 1, p.n)
		require.True(t, p.probe)
		require.Equal(t, sluice.CircuitHalfOpen, p.claimed(nil, 1).Breaker.State, "probing: half-open")
		require.Equal(t, sluice.CircuitOpen, p.claimed(nil, 0).Breaker.State, "nothing to probe with: stays open")
	})
	t.Run("half-open probes again", func(t *testing.T) {
		tg := healthy
		tg.Flow.Breaker = openBreaker(time.Minute)
		tg.Flow.Breaker.State = sluice.CircuitHalfOpen
		p := planClaim(tg, clock)
		require.Equal(t, 1, p.n)
		require.True(t, p.probe)
	})
	t.Run("token bucket", func(t *testing.T) {
		tg := healthy
		tg.RateLimit = &sluice.RateLimit{PerSecond: 2, Burst: 3}
		p := planClaim(tg, clock)
		require.Equal(t, 2, p.n, "a new bucket starts full: the burst less the way's allowance (2.94), under max_in_flight")
		tg.Flow = p.claimed(tg.RateLimit, 2)
		require.InDelta(t, 0.94, tg.Flow.Bucket.Tokens, 1e-9, "the claim pays its tokens")
		require.Equal(t, clock, tg.Flow.Bucket.At)
		tg.Flow.Bucket.Tokens = 0 // spent

		later := clock.Add(100 * time.Millisecond)
		p = planClaim(tg, later)
		require.Zero(t, p.n)
		require.True(t, p.blocked())
		require.Equal(t, 400*time.Millisecond, p.wait(later), "0.2 tokens in: 0.8 to go at 2/s")
		require.Equal(t, later.Add(400*time.Millisecond), waitUntil(tg.Flow, tg.RateLimit, later))

		p = planClaim(tg, clock.Add(time.Second))
		require.Equal(t, 2, p.n)
		require.Equal(t, 1, planClaim(Target{MaxInFlight: 1, RateLimit: tg.RateLimit}, clock).n, "max_in_flight under the bucket")
	})
	t.Run("waitUntil", func(t *testing.T) {
		require.True(t, waitUntil(Flow{}, nil, clock).IsZero(), "free to send")
		f := Flow{Throttle: flow.Throttle{Until: clock.Add(time.Hour), Count: 1}}
		require.Equal(t, clock.Add(time.Hour), waitUntil(f, nil, clock))
		f = Flow{Breaker: openBreaker(time.Minute)}
		require.Equal(t, clock.Add(time.Minute), waitUntil(f, nil, clock))
		require.True(t, waitUntil(f, nil, clock.Add(time.Minute)).IsZero(), "probe due")
	})
}

// sent is a batch of attempts with these status codes (0: no response),
// started at clock.
func sent(codes ...int) []sentDelivery {
	out := make([]sentDelivery, len(codes))
	for i, code := range codes {
		res := send.Result{At: clock, StatusCode: code, Latency: 30 * time.Millisecond}
		if !res.Delivered() {
			res.Err = "status 500"
			if code == 0 {
				res.Err = "connection refused"
			}
		}
		out[i] = sentDelivery{result: res}
	}
	return out
}

var testPolicy = flowPolicy{
	throttle: []time.Duration{time.Minute, 5 * time.Minute},
	circuit:  flow.CircuitConfig{Threshold: 3, FirstProbe: 30 * time.Second, MaxProbe: flow.DefaultMaxProbe},
}

func TestUnitFlowApply(t *testing.T) {
	t.Parallel()
	now := clock.Add(time.Second)

	t.Run("healthy batch changes nothing", func(t *testing.T) {
		f := Flow{Breaker: flow.Breaker{State: sluice.CircuitClosed}}
		after, changes := testPolicy.apply(f, nil, sent(200, 204), now)
		require.Equal(t, f, after)
		require.Empty(t, changes)
		require.False(t, testPolicy.changes(f, nil, sent(200, 204), now), "recorded on the unlocked path")
		require.True(t, testPolicy.changes(f, nil, sent(200, 500), now), "a failure counts: under the lock")
	})
	t.Run("429 throttles", func(t *testing.T) {
		batch := sent(429)
		batch[0].result.RetryAfter = 7 * time.Second
		after, changes := testPolicy.apply(Flow{}, nil, batch, now)
		require.Empty(t, changes)
		require.Equal(t, now.Add(7*time.Second), after.Throttle.Until, "Retry-After")
		require.Equal(t, 1, after.Throttle.Count)

		// Started once the window had ended: the second 429 in a row.
		later := after.Throttle.Until.Add(time.Millisecond)
		second := sent(429)
		second[0].result.At = later
		after, _ = testPolicy.apply(after, nil, second, later)
		require.Equal(t, later.Add(5*time.Minute), after.Throttle.Until, "second in a row: the schedule's second step")
		require.Equal(t, 2, after.Throttle.Count)
		require.Zero(t, after.Breaker.Failures, "a 429 is no failure")

		kept, _ := testPolicy.apply(after, nil, sent(429, 200), later)
		require.Equal(t, after.Throttle, kept.Throttle, "a success in the batch that was throttled keeps the throttle")
	})
	t.Run("429s in flight together are one in a row", func(t *testing.T) {
		after, _ := testPolicy.apply(Flow{}, nil, sent(429, 429, 429, 429), now)
		require.Equal(t, 1, after.Throttle.Count, "four attempts in flight at once met the same refusal")
		require.Equal(t, now.Add(time.Minute), after.Throttle.Until, "the schedule's first step")
		// One more started before the window opened, answered after.
		again, _ := testPolicy.apply(after, nil, sent(429), now.Add(time.Second))
		require.Equal(t, after.Throttle, again.Throttle)
		lifted, _ := testPolicy.apply(after, nil, sent(200), now)
		require.Equal(t, flow.Throttle{}, lifted.Throttle, "a success lifts it")
	})
	t.Run("failures open the circuit at the threshold, once", func(t *testing.T) {
		after, changes := testPolicy.apply(Flow{}, nil, sent(500, 0), now)
		require.Empty(t, changes)
		require.Equal(t, 2, after.Breaker.Failures)

		after, changes = testPolicy.apply(after, nil, sent(500, 500, 500), now)
		require.Len(t, changes, 1, "one transition, however many failures follow it in the batch")
		require.Equal(t, CircuitChange{Opened: true, LastError: "status 500", Failures: 3, NextProbeAt: changes[0].NextProbeAt}, changes[0])
		require.Equal(t, now.Add(30*time.Second), *changes[0].NextProbeAt)
		require.Equal(t, sluice.CircuitOpen, after.Breaker.State)
		require.Equal(t, 5, after.Breaker.Failures)

		again, changes := testPolicy.apply(after, nil, sent(500), now)
		require.Empty(t, changes, "open already: no second transition")
		require.Equal(t, 6, again.Breaker.Failures)
	})
	t.Run("success closes the circuit and empties the bucket", func(t *testing.T) {
		rl := &sluice.RateLimit{PerSecond: 10, Burst: 10}
		f := Flow{Breaker: openBreaker(time.Minute), Bucket: flow.Bucket{Tokens: 9, At: clock}}
		f.Breaker.State = sluice.CircuitHalfOpen
		after, changes := testPolicy.apply(f, rl, sent(200), now)
		require.Equal(t, []CircuitChange{{Opened: false}}, changes)
		require.Equal(t, flow.Breaker{State: sluice.CircuitClosed}, after.Breaker)
		require.Equal(t, flow.Bucket{Tokens: 0, At: now}, after.Bucket, "the backlog drains at the rate, not as a burst")
	})
	t.Run("failed probe reopens with the interval doubled", func(t *testing.T) {
		f := Flow{Breaker: openBreaker(time.Minute)}
		f.Breaker.State = sluice.CircuitHalfOpen
		after, changes := testPolicy.apply(f, nil, sent(500), now)
		require.Empty(t, changes, "still open: nothing to tell")
		require.Equal(t, sluice.CircuitOpen, after.Breaker.State)
		require.Equal(t, now.Add(2*time.Minute), *after.Breaker.NextProbeAt)
	})
	t.Run("rate-limited bucket restated at the last start", func(t *testing.T) {
		rl := &sluice.RateLimit{PerSecond: 10, Burst: 5}
		f := Flow{Bucket: flow.Bucket{Tokens: 0, At: clock.Add(-time.Second)}}
		after, _ := testPolicy.apply(f, rl, sent(200, 200), now)
		require.InDelta(t, 4.7-2, after.Bucket.Tokens, 1e-9, "refilled up to the burst (less the way's allowance) minus the batch")
		require.Equal(t, clock, after.Bucket.At, "as of the last start")
	})
}

// TestUnitTransitionObservedOnce: the record step checks the batch
// against the flow state it last read (changes) and applies it under the
// lock (apply); only observeBatch, once per committed batch, counts and logs.
func TestUnitTransitionObservedOnce(t *testing.T) {
	w := &Worker{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, flow: testPolicy}
	opened := metrics.CircuitTransitions.WithLabelValues("opened")
	start := counted(t, opened)

	f := Flow{Breaker: flow.Breaker{State: sluice.CircuitClosed, Failures: 2}}
	batch := sent(500, 500)
	require.True(t, w.flow.changes(f, nil, batch, clock))
	after, changes := w.flow.apply(f, nil, batch, clock)
	require.Equal(t, start, counted(t, opened), "deciding counts nothing")
	w.observeBatch(Target{ID: uuid.New()}, changes, f, after, batch)
	require.Equal(t, start+1, counted(t, opened))
}

func TestUnitRetryOutcome(t *testing.T) {
	t.Parallel()
	r := Retry{Schedule: []time.Duration{time.Minute, 10 * time.Minute}, Jitter: 0.2}
	fresh := Claimed{ID: uuid.New(), EventID: uuid.New(), NextAttemptAt: clock.Add(-time.Second)}
	now := clock.Add(time.Second)

	t.Run("delivered: the attempt as sent", func(t *testing.T) {
		res := send.Result{At: clock, StatusCode: 200, Latency: 1500 * time.Microsecond, Body: "ok"}
		o := r.Outcome(fresh, res, now)
		require.Equal(t, Outcome{
			DeliveryID: fresh.ID, EventID: fresh.EventID, Status: sluice.DeliveryDelivered,
			At: clock, StatusCode: 200, LatencyMS: 1, ResponseBody: "ok",
		}, o)
	})
	t.Run("429 keeps its place and its budget", func(t *testing.T) {
		o := r.Outcome(fresh, send.Result{At: clock, StatusCode: 429, Err: "status 429"}, now)
		require.Equal(t, sluice.DeliveryPending, o.Status)
		require.False(t, o.Failed)
		require.Equal(t, fresh.NextAttemptAt, o.NextAttemptAt)
		retried := fresh
		retried.FailureCount = 1
		require.Equal(t, sluice.DeliveryFailed, r.Outcome(retried, send.Result{StatusCode: 429}, now).Status)
	})
	t.Run("schedule with jitter", func(t *testing.T) {
		res := send.Result{At: clock, Err: "connection refused"}
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 2000 {
			o := r.Outcome(fresh, res, now)
			require.Equal(t, sluice.DeliveryFailed, o.Status)
			require.True(t, o.Failed)
			require.Equal(t, "connection refused", o.Error)
			require.Zero(t, o.StatusCode)
			wait := o.NextAttemptAt.Sub(now)
			lo, hi = min(lo, wait), max(hi, wait)
		}
		require.GreaterOrEqual(t, lo, 48*time.Second, "at most a fifth earlier")
		require.LessOrEqual(t, hi, 72*time.Second, "at most a fifth later")
		require.Less(t, lo, 55*time.Second, "spread")
		require.Greater(t, hi, 65*time.Second, "spread")

		second := fresh
		second.FailureCount = 1
		wait := r.Outcome(second, res, now).NextAttemptAt.Sub(now)
		require.True(t, wait >= 8*time.Minute && wait <= 12*time.Minute, "the schedule's second step: %s", wait)
	})
	t.Run("dead after the last attempt", func(t *testing.T) {
		last := fresh
		last.FailureCount = len(r.Schedule)
		o := r.Outcome(last, send.Result{At: clock, StatusCode: 500, Err: "status 500"}, now)
		require.Equal(t, sluice.DeliveryDead, o.Status)
		require.True(t, o.Failed)
		require.True(t, o.NextAttemptAt.IsZero())
	})
	t.Run("503 Retry-After", func(t *testing.T) {
		long := send.Result{At: clock, StatusCode: 503, Err: "status 503", RetryAfter: time.Hour}
		require.Equal(t, now.Add(time.Hour), r.Outcome(fresh, long, now).NextAttemptAt, "longer than the schedule: waited")
		short := long
		short.RetryAfter = time.Second
		wait := r.Outcome(fresh, short, now).NextAttemptAt.Sub(now)
		require.True(t, wait >= 48*time.Second && wait <= 72*time.Second, "shorter: the schedule's: %s", wait)
		other := long
		other.StatusCode = 500
		wait = r.Outcome(fresh, other, now).NextAttemptAt.Sub(now)
		require.LessOrEqual(t, wait, 72*time.Second, "only a 503's Retry-After postpones a retry")
	})
}

func TestUnitRecorderGroups(t *testing.T) {
	t.Parallel()
	outcome := func() Outcome { return Outcome{DeliveryID: uuid.New()} }

	t.Run("one statement per group", func(t *testing.T) {
		var saved [][]Outcome
		save := func(_ context.Context, o []Outcome) error { saved = append(saved, o); return nil }
		a, b, c := outcome(), outcome(), outcome()
		res, err := recordRuns(save)(t.Context(), [][]Outcome{{a}, {b, c}, nil})
		require.NoError(t, err)
		require.Len(t, res, 3, "one answer per run")
		require.Equal(t, [][]Outcome{{a, b, c}}, saved, "the runs' attempts in one call, in order")
	})
	t.Run("a rejected run fails alone", func(t *testing.T) {
		bad := outcome()
		var mu sync.Mutex
		stored := map[uuid.UUID]bool{}
		save := func(_ context.Context, os []Outcome) error {
			for _, o := range os {
				if o.DeliveryID == bad.DeliveryID {
					return &pgconn.PgError{Code: "22021"} // a NUL byte, say
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range os {
				stored[o.DeliveryID] = true
			}
			return nil
		}
		r := newRecorder(save, 1)
		defer r.close()
		good := make([]Outcome, 40)
		var wg sync.WaitGroup
		for i := range good {
			good[i] = outcome()
			wg.Go(func() { require.NoError(t, r.record(t.Context(), []Outcome{good[i]})) })
		}
		wg.Go(func() {
			err := r.record(t.Context(), []Outcome{bad})
			require.True(t, sluice.RowRejected(err), "%v", err)
		})
		wg.Wait()
		for _, o := range good {
			require.True(t, stored[o.DeliveryID])
		}
	})
	t.Run("after close, on its own", func(t *testing.T) {
		calls := 0
		r := newRecorder(func(context.Context, []Outcome) error { calls++; return nil }, 1)
		r.close()
		require.NoError(t, r.record(t.Context(), []Outcome{outcome()}))
		require.Equal(t, 1, calls)
	})
}

// counted is a counter's value.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// TestUnitRecordOutlivesItsRunByGrace: recording waits as long as its run
// lives, however long that is, and grace longer once the run is cut short.
func TestUnitRecordOutlivesItsRunByGrace(t *testing.T) {
	clk := fakeclock.New(clock)
	run, cut := context.WithCancel(t.Context())
	rctx, cancel := recordContext(run, clk, time.Second)
	defer cancel()

	clk.Advance(time.Hour)
	require.NoError(t, rctx.Err(), "no deadline while the run lives")
	cut()
	require.Equal(t, time.Second, <-clk.Waits, "grace starts when the run is cut")
	require.NoError(t, rctx.Err(), "still recording within grace")
	clk.Advance(time.Second)
	<-rctx.Done()
}

// TestUnitAdaptiveApply: on an adaptive endpoint 429s, 503s and timeouts
// halve the rate once a batch; a 429 without Retry-After opens no throttle
// window, one with it does; 503s and timeouts still count as failures;
// and the claim paces at the effective rate.
func TestUnitAdaptiveApply(t *testing.T) {
	t.Parallel()
	now := clock.Add(time.Second)
	rl := &sluice.RateLimit{PerSecond: 100, Burst: 100, Adaptive: true}

	t.Run("429 without Retry-After lowers the rate, no throttle", func(t *testing.T) {
		after, _ := testPolicy.apply(Flow{}, rl, sent(429, 429, 200), now)
		require.Equal(t, flow.Throttle{}, after.Throttle)
		require.InDelta(t, 50.0, after.Adaptive.Current(flow.LimitOf(*rl), now), 1e-9, "halved once for the batch")
		require.Zero(t, after.Breaker.Failures)
		require.True(t, testPolicy.changes(Flow{}, rl, sent(429), now), "under the lock")
	})
	t.Run("429 with Retry-After does both", func(t *testing.T) {
		batch := sent(429)
		batch[0].result.RetryAfter = 7 * time.Second
		after, _ := testPolicy.apply(Flow{}, rl, batch, now)
		require.Equal(t, now.Add(7*time.Second), after.Throttle.Until)
		require.InDelta(t, 50.0, after.Adaptive.Current(flow.LimitOf(*rl), now), 1e-9)
	})
	t.Run("503 and timeouts lower it and are failures", func(t *testing.T) {
		batch := sent(503, 0)
		batch[1].result.Err = "timeout: context deadline exceeded"
		after, _ := testPolicy.apply(Flow{}, rl, batch, now)
		require.InDelta(t, 50.0, after.Adaptive.Current(flow.LimitOf(*rl), now), 1e-9)
		require.Equal(t, 2, after.Breaker.Failures)
	})
	t.Run("other failures leave it", func(t *testing.T) {
		after, _ := testPolicy.apply(Flow{}, rl, sent(500, 0), now)
		require.Equal(t, flow.Adaptive{}, after.Adaptive)
	})
	t.Run("not adaptive: a 429 throttles, the rate stays", func(t *testing.T) {
		fixed := &sluice.RateLimit{PerSecond: 100, Burst: 100}
		after, _ := testPolicy.apply(Flow{}, fixed, sent(429), now)
		require.Equal(t, flow.Adaptive{}, after.Adaptive)
		require.Equal(t, 1, after.Throttle.Count)
	})
	t.Run("the claim paces at the effective rate", func(t *testing.T) {
		f := Flow{Adaptive: flow.Adaptive{Rate: 10, At: clock, HalvedAt: clock}, Bucket: flow.Bucket{Tokens: 0, At: clock}}
		p := planClaim(Target{MaxInFlight: 100, RateLimit: rl, Flow: f}, clock.Add(100*time.Millisecond))
		require.Equal(t, 1, p.n, "10/s for 100 ms: one token (at 100/s it would be ten)")
		fresh := planClaim(Target{MaxInFlight: 100, RateLimit: rl}, clock)
		require.Zero(t, fresh.n, "an adaptive bucket starts empty")
		require.Positive(t, fresh.tokenWait)
	})
}

func TestUnitFlowDisable(t *testing.T) {
	t.Parallel()
	pol := testPolicy
	pol.disableAfter = time.Hour
	now := clock.Add(2 * time.Hour)
	closed := Flow{Breaker: flow.Breaker{State: sluice.CircuitClosed}}
	openedAt := func(ago time.Duration) Flow {
		return Flow{Breaker: flow.Breaker{State: sluice.CircuitOpen, OpenedAt: new(now.Add(-ago)), LastError: "status 500"}}
	}

	reason, _ := pol.disable(closed, sent(200, 410), now)
	require.Equal(t, sluice.DisabledGone, reason, "a 410 disables at once, whatever the circuit")
	require.True(t, needsOpEvent(sent(410)), "a 410 is recorded under the lock")

	reason, lastError := pol.disable(openedAt(time.Hour), sent(500), now)
	require.Equal(t, sluice.DisabledFailing, reason, "a failed probe an hour after the circuit opened")
	require.Equal(t, "status 500", lastError)

	reason, _ = pol.disable(openedAt(59*time.Minute), sent(500), now)
	require.Empty(t, reason, "not yet")
	reason, _ = pol.disable(openedAt(2*time.Hour), sent(429), now)
	require.Empty(t, reason, "a 429 is no failed attempt")
	reason, _ = pol.disable(closed, sent(500), now)
	require.Empty(t, reason, "a closed circuit")

	pol.disableAfter = 0
	reason, _ = pol.disable(openedAt(1000*time.Hour), sent(500), now)
	require.Empty(t, reason, "SLUICE_DISABLE_AFTER=off")
}
