package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// An offered load: events at a fixed rate, whatever Sluice's pace, each
// payload carrying its sent_ns.

// offerFunc offers events of types (round robin) at rate events/s for
// duration and returns how many were accepted and how many could not be
// sent on time.
type offerFunc func(ctx context.Context, api *Client, types []string, rate float64, duration time.Duration) (accepted, skipped int, err error)

// offerLoad posts a small batch every 10 ms (what is due by then), as the
// latency scenario does, with at most 64 batches outstanding.
func offerLoad(ctx context.Context, api *Client, types []string, rate float64, duration time.Duration) (accepted, skipped int, err error) {
	return offer(ctx, rate, duration, 64, 1000, postBatch(ctx, api, types))
}

// postBatch is offerLoad's send: events first to first+k-1 in one batch,
// their types in turn, stamped with the time they are sent.
func postBatch(ctx context.Context, api *Client, types []string) func(first, k int) error {
	return func(first, k int) error {
		evs := make([]EventIn, k)
		sentNS := time.Now().UnixNano()
		for j := range evs {
			evs[j] = EventIn{Type: types[(first+j)%len(types)], Payload: payload(sentNS, first+j)}
		}
		return api.PostBatch(ctx, batchBody(evs))
	}
}

// offerSingles posts every event on a request of its own, started when it
// is due (checked every 10 ms), with at most 256 requests outstanding.
func offerSingles(ctx context.Context, api *Client, types []string, rate float64, duration time.Duration) (accepted, skipped int, err error) {
	return offer(ctx, rate, duration, 256, 1, func(seq, _ int) error {
		return api.PostEvent(ctx, eventBody(EventIn{Type: types[seq%len(types)], Payload: payload(time.Now().UnixNano(), seq)}))
	})
}

// offer calls send(first, k) for the events due every 10 ms at rate: once
// a tick with up to per of them when per > 1 (a batch), once for each when
// per is 1; at most maxPending sends are outstanding. A send that finds
// none free is skipped and counted: a batch's events are caught up next
// tick, a single event is dropped rather than sent late. It returns the
// events accepted and the sends skipped.
func offer(ctx context.Context, rate float64, duration time.Duration, maxPending, per int, send func(first, k int) error) (accepted, skipped int, err error) {
	const tick = 10 * time.Millisecond
	var (
		wg       sync.WaitGroup
		pending  = make(chan struct{}, maxPending)
		mu       sync.Mutex
		ok       int
		failed   int
		firstErr error
		sent     int
	)
	start := time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for now := start; now.Sub(start) < duration && ctx.Err() == nil; now = <-ticker.C {
	due:
		for due := int(rate * now.Sub(start).Seconds()); sent < due; {
			k := min(due-sent, per)
			select {
			case pending <- struct{}{}:
			default:
				skipped++
				if per > 1 {
					break due // a batch catches up next tick, without a send slot
				}
				sent++ // a single event is dropped, not sent late
				continue
			}
			first := sent
			sent += k
			wg.Go(func() {
				defer func() { <-pending }()
				err := send(first, k)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed += k
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				ok += k
			})
			if per > 1 {
				break due // one batch a tick
			}
		}
	}
	wg.Wait()
	if failed > 0 {
		return 0, skipped, fmt.Errorf("%d events not accepted, first error: %w", failed, firstErr)
	}
	return ok, skipped, nil
}

// offered is what a load offered in the background had accepted and
// skipped, and how it ended.
type offered struct {
	accepted, skipped int
	err               error
}

// inBackground runs load on a goroutine of its own; the channel has what
// it offered once it ends.
func inBackground(load func() (accepted, skipped int, err error)) <-chan offered {
	done := make(chan offered, 1)
	go func() {
		var o offered
		o.accepted, o.skipped, o.err = load()
		done <- o
	}()
	return done
}
