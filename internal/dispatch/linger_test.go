package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
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
