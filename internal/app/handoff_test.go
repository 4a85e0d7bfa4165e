package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestTrickleIsHandedOverWithoutClaims: posts arriving one at a time, each
// after the last was delivered, reach the endpoint's lingering run with
// their deliveries, which it sends without claiming them from the
// database: batches are handed over, a few claimed (a run's first, one
// after a failure, and one a second to read the endpoint again). Every
// event arrives once, and one that failed is retried while the posts go
// on. It runs alone (startTimed) so the batch counters are this test's.
func TestTrickleIsHandedOverWithoutClaims(t *testing.T) {
	h := startTimed(t, nil, app.Roles{API: true, Worker: true})
	rcv := receiver.New(t)
	rcv.AnswerFunc(func(n int) receiver.Behavior {
		if n == 5 {
			return receiver.Behavior{Status: 500}
		}
		return receiver.Behavior{}
	})
	h.endpoint(rcv, []string{"trickle.*"}, nil)
	before := h.scrape()

	const posts = 40
	for i := range posts {
		h.post("trickle.tick", map[string]int{"i": i})
		eventually(t, 10*time.Second, func() bool { return unique(rcv) == i+1 }, "event %d delivered", i)
	}
	eventually(t, 10*time.Second, func() bool { return rcv.Count() == posts+1 }, "the failed one retried")
	require.Equal(t, posts, unique(rcv))
	require.Equal(t, posts+1, rcv.Count(), "each once, and the failed one again")

	after := h.scrape()
	const handedSeries, claimedSeries = `sluice_dispatch_batches_total{source="handed"}`, `sluice_dispatch_batches_total{source="claimed"}`
	handed, claimed := after[handedSeries]-before[handedSeries], after[claimedSeries]-before[claimedSeries]
	t.Logf("batches: %v handed, %v claimed", handed, claimed)
	// Half, or more, on a quiet machine; a loaded one reads the endpoint
	// again (a claim) more often, since each read is trusted for a second.
	require.GreaterOrEqual(t, handed, float64(posts)/4, "batches handed over (%v claimed)", claimed)
	require.GreaterOrEqual(t, claimed, 1.0, "the run's first batch, at least, is claimed")
}
