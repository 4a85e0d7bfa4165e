package dispatch

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestUnitRecorderTiming: the recorder has no flush interval. A lone run's
// attempts are saved at once, and runs that arrive while a statement is
// committing share the next one. The recorder reads no Clock, so the test
// runs in a synctest bubble, whose time moves only when every goroutine in
// it is waiting: a recorder that waited on a timer would move it.
func TestUnitRecorderTiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			saved [][]Outcome
			hold  chan struct{} // when set, the next save waits for it to close
		)
		save := func(_ context.Context, o []Outcome) error {
			mu.Lock()
			saved = append(saved, o)
			wait := hold
			hold = nil
			mu.Unlock()
			if wait != nil {
				<-wait
			}
			return nil
		}
		r := newRecorder(save, 1)
		defer r.close()
		start := time.Now()
		run := func() []Outcome { return []Outcome{{DeliveryID: uuid.New()}} }

		require.NoError(t, r.record(t.Context(), run()))
		require.Equal(t, start, time.Now(), "a lone run is saved without waiting for company")
		require.Len(t, saved, 1)

		release := make(chan struct{})
		mu.Lock()
		hold = release
		mu.Unlock()
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, r.record(t.Context(), run())) })
		synctest.Wait() // the one committer is busy saving it
		waiting := make([]Outcome, 5)
		for i := range waiting {
			waiting[i] = run()[0]
			wg.Go(func() { require.NoError(t, r.record(t.Context(), waiting[i:i+1])) })
		}
		synctest.Wait() // all five wait for the committer
		close(release)
		wg.Wait()
		require.Len(t, saved, 3, "the five that waited share one statement")
		require.ElementsMatch(t, waiting, saved[2])
		require.Equal(t, start, time.Now(), "and no time passed")
	})
}
