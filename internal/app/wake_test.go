package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestTrickleWakesTheLingeringRun: posts arriving one at a time, each
// after the last was delivered, wake the endpoint's lingering run in this
// process instead of queueing a dispatch job each: the endpoint needs a
// new job only at its first post and when a run yields. Every event
// arrives once, and one that failed is retried while the posts go on.
func TestTrickleWakesTheLingeringRun(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(n int) receiver.Behavior {
		if n == 5 {
			return receiver.Behavior{Status: 500}
		}
		return receiver.Behavior{}
	})
	id, _ := h.endpoint(rcv, []string{"trickle.*"}, nil)

	const posts = 40
	start := time.Now()
	for i := range posts {
		h.post("trickle.tick", map[string]int{"i": i})
		eventually(t, 5*time.Second, func() bool { return unique(rcv) == i+1 }, "event %d delivered", i)
	}
	took := time.Since(start)
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == posts+1 }, "the failed one sent again")
	require.Equal(t, posts, unique(rcv), "each once")

	jobs := len(jobstest.Dispatch(t, h.proc.Store.Pool(), id))
	t.Logf("%d posts in %s: %d dispatch jobs", posts, took.Round(time.Millisecond), jobs)
	require.LessOrEqual(t, jobs, posts/4, "posts woke the lingering run rather than queueing a job each")
}

// TestLateFanOutBehindThePosition: a fan-out that commits late makes a
// delivery due from when its transaction began, behind where the busy
// run's claims have moved on to; the run still finds it while posts keep
// it busy, not only once it has nothing else to do.
func TestLateFanOutBehindThePosition(t *testing.T) {
	h := startWith(t, nil, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	id, _ := h.endpoint(rcv, []string{"trickle.*"}, nil)
	h.post("trickle.tick", map[string]int{"i": 0})
	eventually(t, 5*time.Second, func() bool { return unique(rcv) == 1 }, "the first event delivered")

	ctx := t.Context()
	late, err := h.proc.Pool.Begin(ctx)
	require.NoError(t, err)
	defer late.Rollback(ctx)
	_, err = late.Exec(ctx, `
		WITH ev AS (
		    INSERT INTO events (id, tenant_id, type, payload) VALUES (sluice_uuidv7(), $1, 'trickle.late', '{"late":true}')
		    RETURNING id, tenant_id, type
		)
		INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, next_attempt_at)
		SELECT sluice_delivery_id(ev.id, $2), ev.tenant_id, ev.id, $2, ev.type, now() FROM ev`, h.tenant.ID, id)
	require.NoError(t, err)
	for i := 1; i <= 3; i++ { // claims move on past the late delivery's due time
		h.post("trickle.tick", map[string]int{"i": i})
		eventually(t, 5*time.Second, func() bool { return unique(rcv) == i+1 }, "event %d delivered", i)
	}
	require.NoError(t, late.Commit(ctx))

	arrived := func() bool {
		for _, r := range rcv.Requests() {
			if strings.Contains(string(r.Body), `"late":true`) {
				return true
			}
		}
		return false
	}
	const posts = 200
	i, committed := 4, time.Now()
	for ; i < posts && !arrived(); i++ { // the run never runs out of work
		h.post("trickle.tick", map[string]int{"i": i})
		eventually(t, 5*time.Second, func() bool { return unique(rcv) >= i+1 }, "event %d delivered", i)
	}
	t.Logf("the late delivery arrived after %d more posts, %s", i-4, time.Since(committed).Round(time.Millisecond))
	require.True(t, arrived(), "the late delivery arrived while the run was busy")
}
