package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/fakeclock"
)

// answersAtOnce runs decide and returns its answer, failing the test if
// decide starts waiting on clk instead (decide's ctx then ends it).
func answersAtOnce(t *testing.T, clk *fakeclock.Clock, decide func(ctx context.Context) bool) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answer := make(chan bool, 1)
	go func() { answer <- decide(ctx) }()
	select {
	case ok := <-answer:
		return ok
	case d := <-clk.Waits:
		t.Fatalf("waited %s instead of answering at once", d)
		return false
	}
}

// waiting starts decide, which must wait on clk for want, and returns the
// channel its answer comes on once that wait is under way.
func waiting(t *testing.T, clk *fakeclock.Clock, want time.Duration, decide func() bool) <-chan bool {
	t.Helper()
	answer := make(chan bool, 1)
	go func() { answer <- decide() }()
	select {
	case d := <-clk.Waits:
		if d != want {
			t.Fatalf("waits %s, want %s", d, want)
		}
	case ok := <-answer:
		t.Fatalf("answered %v at once instead of waiting %s", ok, want)
	}
	return answer
}
