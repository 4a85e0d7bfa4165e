package app_test

import (
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
