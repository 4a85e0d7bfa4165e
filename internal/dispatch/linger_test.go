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
	require.Equal(t, []uuid.UUID{a, b}, w.Wake([]uuid.UUID{a, b}), "nobody lingers: both need a job")

	woken := make(chan bool)
	go func() { woken <- w.linger(context.Background(), a, time.Now().Add(5*time.Second)) }()
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.waiting) == 1 }, time.Second, time.Millisecond)

	require.False(t, w.linger(context.Background(), b, time.Now().Add(time.Second)), "at capacity: b does not linger")
	require.Equal(t, []uuid.UUID{b}, w.Wake([]uuid.UUID{a, b}), "a's run takes the wake, b needs a job")
	require.True(t, <-woken)
	require.Empty(t, w.waiting, "a woken run leaves the waker")

	start := time.Now()
	require.False(t, w.linger(context.Background(), a, time.Now().Add(50*time.Millisecond)), "not woken: times out at the deadline")
	require.Less(t, time.Since(start), lingerFor)

	var nilWaker *Waker
	require.Equal(t, []uuid.UUID{a}, nilWaker.Wake([]uuid.UUID{a}))
	require.False(t, nilWaker.linger(context.Background(), a, time.Now().Add(time.Second)))
}
