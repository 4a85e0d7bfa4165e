package dbwait

import (
	"context"
	"time"
)

// Retry pauses: the first after a failed try, doubling up to the last, so
// that requests waiting out a failover do not flood the servers that are
// not the leader yet with connection attempts.
const (
	RetryPauseFirst = 50 * time.Millisecond
	RetryPauseMax   = 500 * time.Millisecond
)

// Retry runs try until it succeeds, fails with an error again does not
// accept, or ctx ends, and returns try's last error. Between tries it
// pauses (RetryPauseFirst, doubling up to RetryPauseMax), and the whole of
// it counts as one wait on ctx's budget (Bound): a request bounded by
// dbwait waits out a failover that ends within its bound (no server takes
// writes for a moment) and is answered 503 at the bound otherwise, as if
// it had waited on one statement. again must accept only errors after
// which a new try is safe: nothing was done (no connection could be made,
// or no commit was sent), or the work is idempotent (a read, an event
// with an Idempotency-Key).
func Retry(ctx context.Context, again func(error) bool, try func(context.Context) error) error {
	done := Wait(ctx)
	defer done()
	pause := RetryPauseFirst
	for {
		err := try(ctx)
		if err == nil || !again(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, RetryPauseMax)
	}
}
