package app_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// capacityReceiver answers 429, without Retry-After, to what comes above
// perSecond a second (a token bucket with bursts of burst), 200 to the rest.
type capacityReceiver struct {
	mu        sync.Mutex
	pace      flow.Pace
	bucket    flow.Bucket
	throttled int
	first429  chan struct{}
}

func newCapacityReceiver(rcv *receiver.Receiver, perSecond, burst float64) *capacityReceiver {
	c := &capacityReceiver{pace: flow.Pace{PerSecond: perSecond, Capacity: burst}, first429: make(chan struct{})}
	rcv.AnswerFunc(func(int) receiver.Behavior {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.bucket = c.bucket.Refill(c.pace, time.Now())
		if c.bucket.Available() == 0 {
			if c.throttled == 0 {
				close(c.first429)
			}
			c.throttled++
			return receiver.Behavior{Status: http.StatusTooManyRequests}
		}
		c.bucket = c.bucket.Take(1)
		return receiver.Behavior{}
	})
	return c
}

func (c *capacityReceiver) count429() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttled
}

// TestAdaptiveRateFollowsTheReceiver: an endpoint rate-limited at 100/s,
// adaptive, against a receiver that takes 20/s and answers 429 above it:
// its effective rate falls after the 429s, and it keeps delivering until
// everything is delivered. The 429s carry no Retry-After, so they open no
// throttle window: with the throttle schedule at a minute, one would hold
// the endpoint past the test's deadline.
func TestAdaptiveRateFollowsTheReceiver(t *testing.T) {
	h := startTimed(t, map[string]string{"SLUICE_THROTTLE_SCHEDULE": "1m"}, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	capacity := newCapacityReceiver(rcv, 20, 5)
	id, _ := h.endpoint(rcv, []string{"*"}, map[string]any{
		"rate_limit": map[string]any{"per_second": 100, "adaptive": true, "min": 2},
	})
	var ep struct {
		EffectiveRate *float64 `json:"effective_rate"`
		Status        string   `json:"status"`
	}
	h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &ep)
	require.NotNil(t, ep.EffectiveRate)
	require.InDelta(t, 100.0, *ep.EffectiveRate, 1e-9, "starts at the configured rate")

	const events = 60
	h.postBatch("load.test", events)
	select {
	case <-capacity.first429:
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver never answered 429: the endpoint never went above its capacity")
	}
	eventually(t, 5*time.Second, func() bool {
		h.call(http.MethodGet, "/v1/endpoints/"+id, nil, http.StatusOK, &ep)
		return *ep.EffectiveRate < 100
	}, "the effective rate falls after a 429")
	require.GreaterOrEqual(t, *ep.EffectiveRate, 2.0, "never below min")
	require.NotEqual(t, sluice.EndpointThrottled, ep.Status, "a 429 without Retry-After opens no throttle window on an adaptive endpoint")

	eventually(t, 30*time.Second, func() bool {
		return len(h.deliveries("status=delivered&endpoint_id="+id)) == events
	}, "every delivery delivered at the lowered rate")
	attempts := len(h.attemptTimes(id))
	t.Logf("%d attempts for %d deliveries, %d answered 429", attempts, events, capacity.count429())
	require.Equal(t, attempts, events+capacity.count429(), "every attempt beyond one a delivery was a 429")
	require.Empty(t, h.deliveries("status=dead&endpoint_id="+id), "429s spend no retry budget")

	var slowdowns []dbq.EffectiveRateChangesRow
	require.NoError(t, h.proc.Store.InTx(context.Background(), func(tx store.Tx) error {
		var err error
		slowdowns, err = tx.Q.EffectiveRateChanges(context.Background(), dbq.EffectiveRateChangesParams{
			EndpointID: uuid.MustParse(id), Since: time.Now().Add(-time.Hour),
		})
		return err
	}))
	require.NotEmpty(t, slowdowns, "each slowdown is kept for the dashboard's chart")
	for _, s := range slowdowns {
		require.GreaterOrEqual(t, s.Rate, 2.0)
		require.Less(t, s.Rate, 100.0)
	}
}
