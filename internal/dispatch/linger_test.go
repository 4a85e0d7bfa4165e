package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/store"
)

func TestWaker(t *testing.T) {
	t.Parallel()
	w := NewWaker(1)
	a, b := uuid.New(), uuid.New()
	require.Equal(t, []uuid.UUID{a, b}, w.Wake([]uuid.UUID{a, b}), "no runs: both need a job")

	chA := w.join(a)
	require.NotNil(t, chA)
	require.Nil(t, w.join(a), "one registered run per endpoint")
	require.Equal(t, []uuid.UUID{b}, w.Wake([]uuid.UUID{a, b}), "a's run takes the wake, b needs a job")
	require.True(t, w.linger(context.Background(), realClock{}, chA, time.Now().Add(time.Second)), "a signal while busy is kept")

	woken := make(chan bool)
	go func() { woken <- w.linger(context.Background(), realClock{}, chA, time.Now().Add(5*time.Second)) }()
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.lingering == 1 }, time.Second, time.Millisecond)
	chB := w.join(b)
	require.False(t, w.linger(context.Background(), realClock{}, chB, time.Now().Add(time.Second)), "at the linger limit: b does not wait")
	w.Wake([]uuid.UUID{a})
	require.True(t, <-woken)

	start := time.Now()
	require.False(t, w.linger(context.Background(), realClock{}, chA, time.Now().Add(50*time.Millisecond)), "not woken: times out at the deadline")
	require.Less(t, time.Since(start), lingerFor)

	w.leave(a, chA)
	w.leave(a, chA)
	require.Equal(t, []uuid.UUID{a}, w.Wake([]uuid.UUID{a}), "a run that left needs a job")

	var off *Waker
	require.Equal(t, []uuid.UUID{a}, off.Wake([]uuid.UUID{a}))
	require.Nil(t, off.join(a))
}

// TestWakerHandsOverOnlyWhatNoClaimTook: a run takes handed deliveries
// only when no claim of its own could have taken them already (a claim
// completed after the hand-off's Seq was read, or ran while they were
// handed), and only when nothing came without its deliveries; otherwise
// it is told to claim. Anything else could send a delivery twice, or
// leave one waiting behind a stream of hand-offs.
func TestWakerHandsOverOnlyWhatNoClaimTook(t *testing.T) {
	w := NewWaker(10)
	ep := uuid.New()
	made := func() []store.Claimed { return []store.Claimed{{ID: uuid.New()}} }
	claim := func(r *registration) { w.claiming(r); w.claimed(r) }
	r := w.join(ep)
	w.Hand(w.Seq(), store.Touched{ep: made()})
	require.Empty(t, w.take(r), "a new run claims first")

	claim(r)
	one := made()
	require.Empty(t, w.Hand(w.Seq(), store.Touched{ep: one}), "the run is registered")
	require.Equal(t, one, w.take(r), "handed after its claim: sent as they are")
	require.Empty(t, w.take(r), "taken once")

	a, b := made(), made()
	w.Hand(w.Seq(), store.Touched{ep: a})
	w.Hand(w.Seq(), store.Touched{ep: b})
	require.Equal(t, append(a, b...), w.take(r), "two commits' deliveries together")

	before := w.Seq()
	claim(r)
	w.Hand(before, store.Touched{ep: made()})
	require.Empty(t, w.take(r), "Seq read before the claim completed: the claim may have taken them")

	w.claiming(r)
	w.Hand(w.Seq(), store.Touched{ep: made()})
	w.claimed(r)
	require.Empty(t, w.take(r), "handed while the claim ran")

	claim(r)
	w.Hand(w.Seq(), store.Touched{ep: made()})
	w.Wake([]uuid.UUID{ep})
	require.Empty(t, w.take(r), "a signal without deliveries: something else is queued")

	claim(r)
	w.Wake([]uuid.UUID{ep})
	w.Hand(w.Seq(), store.Touched{ep: made()})
	require.Empty(t, w.take(r), "the same, in the other order")

	w.claiming(r)
	w.Wake([]uuid.UUID{ep})
	w.claimed(r)
	w.Hand(w.Seq(), store.Touched{ep: made()})
	require.Empty(t, w.take(r), "a signal while the claim ran may be for what it did not see")

	claim(r)
	w.Hand(w.Seq(), store.Touched{ep: nil})
	require.Empty(t, w.take(r), "a commit that does not know its deliveries")

	claim(r)
	w.Hand(w.Seq(), store.Touched{ep: made()})
	w.Hand(w.Seq(), store.Touched{ep: []store.Claimed{{ID: uuid.New(), Payload: make([]byte, maxHandedBytes)}}})
	require.Empty(t, w.take(r), "more than a run may hold: it claims them later")

	other := uuid.New()
	require.Equal(t, []uuid.UUID{other}, w.Hand(w.Seq(), store.Touched{other: made()}), "no run: a job")
	var off *Waker
	require.Equal(t, []uuid.UUID{other}, off.Hand(off.Seq(), store.Touched{other: made()}))
}
