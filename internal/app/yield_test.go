package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestBudgetEndsTheRunOrYields: a dispatch run whose budget (at most 6 s)
// runs out while a receiver holds its request for 6.5 s ends with one job
// if that was its endpoint's last due delivery, and yields to a successor
// if another is due, which delivers it.
func TestBudgetEndsTheRunOrYields(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_DELIVERY_TIMEOUT": "10s"}, app.Roles{API: true, Worker: true})
	last, more := receiver.New(t), receiver.New(t)
	last.AnswerFunc(slowFirst)
	more.AnswerFunc(slowFirst)
	oneShot := map[string]any{"max_in_flight": 1} // a full claim: the run cannot know it took the last
	lastID, _ := h.endpoint(last, []string{"yield.last"}, oneShot)
	moreID, _ := h.endpoint(more, []string{"yield.more"}, oneShot)
	h.post("yield.last", map[string]int{"i": 0})
	h.postBatch("yield.more", 2)

	eventually(t, 20*time.Second, func() bool { return last.Count() == 1 && more.Count() == 2 }, "all delivered")
	jobs := func(endpointID string) (done, live int) {
		all := jobstest.Dispatch(t, h.proc.Store.Pool(), endpointID)
		live = len(jobstest.Live(all))
		return len(all) - live, live
	}
	eventually(t, 10*time.Second, func() bool { _, l1 := jobs(lastID); _, l2 := jobs(moreID); return l1+l2 == 0 }, "runs ended")
	done, _ := jobs(lastID)
	require.Equal(t, 1, done, "the run that sent the last due delivery ended without a successor")
	done, _ = jobs(moreID)
	require.Equal(t, 2, done, "the run with a delivery still due yielded to a successor")
	// No job is live, so no request is in flight or to come.
	require.Equal(t, 1, last.Count())
	require.Equal(t, 2, more.Count(), "each delivered once")
}

// slowFirst holds the first request 6.5 s, past any run's budget, and
// answers the others at once.
func slowFirst(n int) receiver.Behavior {
	if n == 1 {
		return receiver.Behavior{Delay: 6500 * time.Millisecond}
	}
	return receiver.Behavior{}
}

// TestYieldDoesNotWaitForFanOut: a run whose budget runs out with a
// delivery still due yields to its successor while a fan-out to the
// endpoint (here a transaction holding the KEY SHARE lock its delivery
// inserts take) is still open, instead of waiting for it to commit.
func TestYieldDoesNotWaitForFanOut(t *testing.T) {
	h := startWith(t, map[string]string{"SLUICE_DELIVERY_TIMEOUT": "10s"}, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	rcv.AnswerFunc(slowFirst)
	id, _ := h.endpoint(rcv, []string{"yield.held"}, map[string]any{"max_in_flight": 1})
	h.postBatch("yield.held", 2)
	eventually(t, 5*time.Second, func() bool { return rcv.Count() == 1 }, "the first request held")

	fanOut, err := h.proc.Store.Pool().Begin(t.Context())
	require.NoError(t, err)
	defer fanOut.Rollback(t.Context())
	_, err = fanOut.Exec(t.Context(), `SELECT 1 FROM endpoints WHERE id = $1 FOR KEY SHARE`, id)
	require.NoError(t, err)
	eventually(t, 20*time.Second, func() bool { return rcv.Count() == 2 }, "the second delivered while the fan-out is open")
}
