package watch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAwaitWakesOnAdd(t *testing.T) {
	var l List[int]
	done := make(chan bool)
	go func() { done <- l.Await(time.Minute, func(items []int) bool { return len(items) == 2 }) }()
	l.Add(1)
	l.Add(2)
	require.True(t, <-done)
	require.Equal(t, []int{1, 2}, l.Items())
	require.Equal(t, 2, l.Len())
}

func TestAwaitTimesOut(t *testing.T) {
	var l List[string]
	l.Add("a")
	require.False(t, l.Await(10*time.Millisecond, func(items []string) bool { return len(items) > 1 }))
}

func TestItemsIsACopy(t *testing.T) {
	var l List[int]
	l.Add(1)
	items := l.Items()
	items[0] = 9
	require.Equal(t, []int{1}, l.Items())
}
