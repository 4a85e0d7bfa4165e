package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// postResult is what posting a set of request bodies did.
type postResult struct {
	start, end time.Time // first request sent, last answer received
	ok, failed int       // requests
	firstErr   error     // first failure other than the run's deadline
	latencies  []time.Duration
}

// note describes failures, if any.
func (r postResult) note() string {
	if r.failed == 0 {
		return ""
	}
	return fmt.Sprintf("%d requests failed, first: %v", r.failed, r.firstErr)
}

// postAll sends every body through post with conc concurrent clients,
// stopping early when ctx ends.
func postAll(ctx context.Context, bodies [][]byte, conc int, post func(context.Context, []byte) error) postResult {
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		res  = postResult{start: time.Now()}
	)
	for range min(conc, len(bodies)) {
		wg.Go(func() {
			var lat []time.Duration
			ok, failed := 0, 0
			var firstErr error
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					break
				}
				t0 := time.Now()
				err := post(ctx, bodies[i])
				switch {
				case err == nil:
					ok++
					lat = append(lat, time.Since(t0))
				case ctx.Err() != nil && errors.Is(err, ctx.Err()):
					// the run's deadline, reported as a timeout
				default:
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
			}
			mu.Lock()
			res.ok += ok
			res.failed += failed
			res.latencies = append(res.latencies, lat...)
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.end = time.Now()
	return res
}

// timedOut reports whether ctx ended by its deadline.
func timedOut(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}
