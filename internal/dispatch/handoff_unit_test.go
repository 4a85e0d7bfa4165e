package dispatch

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestHandOffNeverRepeatsAClaim walks the hand-off protocol: a run takes
// handed deliveries only when they were inserted after its last claim
// completed, and otherwise claims.
func TestHandOffNeverRepeatsAClaim(t *testing.T) {
	t.Parallel()
	ep, other := uuid.New(), uuid.New()
	delivery := func() []Claimed { return []Claimed{{ID: uuid.New(), Payload: []byte(`{}`)}} }
	setup := func(t *testing.T) (*Nudger, *registration) {
		t.Helper()
		n := NewNudger(nil, nil, NudgerConfig{MaxLinger: 1})
		r := n.join(ep)
		require.NotNil(t, r)
		return n, r
	}
	claim := func(n *Nudger, r *registration) { n.claiming(r); n.claimed(r) }

	t.Run("a new run claims first", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		require.Empty(t, n.Hand(n.Seq(), Made{ep: delivery()}))
		require.Nil(t, n.take(r), "a run that has not claimed may not know its queue")
	})
	t.Run("inserted after the last claim: taken", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		made := delivery()
		require.Empty(t, n.Hand(n.Seq(), Made{ep: made}))
		require.Equal(t, made, n.take(r))
		require.Nil(t, n.take(r), "taken once")
	})
	t.Run("read before a claim completed: refused", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		seq := n.Seq() // then the insert, while the run claims: the claim may return it
		claim(n, r)
		require.Empty(t, n.Hand(seq, Made{ep: delivery()}))
		require.Nil(t, n.take(r))
	})
	t.Run("handed while the claim ran: claim again", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		n.claiming(r)
		n.Hand(n.Seq(), Made{ep: delivery()})
		n.claimed(r)
		require.Nil(t, n.take(r))
	})
	t.Run("a wake without deliveries: claim", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		n.Hand(n.Seq(), Made{ep: delivery()})
		require.Empty(t, n.signal([]uuid.UUID{ep}))
		require.Nil(t, n.take(r))
	})
	t.Run("too large to hold: claim", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		big := []Claimed{{ID: uuid.New(), Payload: make([]byte, maxHandedBytes+1)}}
		n.Hand(n.Seq(), Made{ep: big})
		require.Nil(t, n.take(r))
	})
	t.Run("an endpoint without a run here is nudged", func(t *testing.T) {
		t.Parallel()
		n, r := setup(t)
		claim(n, r)
		require.Equal(t, []uuid.UUID{other}, n.Hand(n.Seq(), Made{other: delivery()}))
		n.leave(ep, r)
		require.Equal(t, []uuid.UUID{ep}, n.Hand(n.Seq(), Made{ep: delivery()}), "nor one whose run left")
	})
}
