package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process waiting for another's token re-reads the row every tokenPoll,
// and tries to take the lease the moment it ends, not on the next poll
// after: a process that died holding it keeps the endpoint without a
// token for one attempt's timeout, no longer.
func TestLeaseWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { u := now.Add(d); return &u }

	require.Equal(t, tokenPoll, leaseWait(now, nil), "no lease: the token is being saved, re-read soon")
	require.Equal(t, tokenPoll, leaseWait(now, at(time.Hour)), "a long lease: re-read for the token meanwhile")
	require.Equal(t, 7*time.Millisecond, leaseWait(now, at(7*time.Millisecond)), "woken at the lease's end")
	require.Equal(t, time.Millisecond, leaseWait(now, at(-time.Second)), "a lease just ended: try again at once, without a busy loop")
}
