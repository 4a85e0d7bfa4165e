package dispatch

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestChooseHeads: a claim takes the due heads, oldest position first, up
// to its limit; a head not yet due says when it will be; a due head held up
// by an unrouted event is not taken, and says so.
func TestChooseHeads(t *testing.T) {
	now := time.Now()
	head := func(key string, due bool, unrouted bool, at time.Time) fifoHead {
		return fifoHead{ID: uuid.New(), OrderingKey: key, Due: due, Unrouted: unrouted, NextAttemptAt: at}
	}
	a, b := head("a", true, false, now), head("b", false, false, now.Add(time.Minute))
	c, d := head("c", true, true, now), head("d", true, false, now)
	e := head("e", false, false, now.Add(time.Second))
	heads := []fifoHead{a, b, c, d, e}

	chosen, next, heldUp := chooseHeads(heads, 10)
	require.Equal(t, []fifoHead{a, d}, chosen)
	require.Equal(t, now.Add(time.Second), *next, "the first head to come due")
	require.True(t, heldUp)

	chosen, _, _ = chooseHeads(heads, 1)
	require.Equal(t, []fifoHead{a}, chosen, "up to the limit, oldest position first")

	chosen, next, heldUp = chooseHeads(nil, 10)
	require.Empty(t, chosen)
	require.Nil(t, next)
	require.False(t, heldUp)
}
