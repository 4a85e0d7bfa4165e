package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// Receivers are loopback receivers that a scenario keeps for all its runs,
// so that Sluice's connections to them stay warm between runs, as they
// would in service.
type Receivers []*receiver.Receiver

func newReceivers(n int) Receivers {
	rs := make(Receivers, n)
	for i := range rs {
		rs[i] = receiver.New(nil)
	}
	return rs
}

// Close stops the receivers.
func (rs Receivers) Close() {
	for _, r := range rs {
		r.Close()
	}
}

// Sinks are one run's view of a scenario's receivers: each behind a new
// endpoint subscribed to its own new event type. Closing them at the end of
// the run deletes the subscriptions, so runs never share endpoints or
// subscriptions.
//
// Closing deletes the subscriptions, not the endpoints: deleting an
// endpoint cascades to its deliveries, and each deleted delivery makes
// Postgres scan the whole deliveries table (the replayed_from foreign key
// has no index), which would make teardown quadratic. Endpoints without a
// subscription get nothing and cost fan-out nothing.
type Sinks struct {
	Types         []string // Types[i] reaches only endpoint i
	receivers     Receivers
	base          []int // requests each receiver had before this run
	subscriptions []string
}

// newSinks makes one endpoint with max_in_flight per receiver; receiver i
// is subscribed to typeOf(i).
func newSinks(ctx context.Context, api *Client, rs Receivers, maxInFlight int, typeOf func(i int) string) (*Sinks, error) {
	return newConsumerSinks(ctx, api, rs, len(rs), maxInFlight, typeOf, func(int) string { return "" })
}

// sinkFeatures are what newSinksUsing gives every endpoint beside the
// plain ones: more endpoint fields (ordering, rate_limit, ...) and a
// payload filter on its subscription.
type sinkFeatures struct {
	endpoint map[string]any
	filter   json.RawMessage
}

// newSinksUsing is newSinks with features.
func newSinksUsing(ctx context.Context, api *Client, rs Receivers, maxInFlight int, typeOf func(i int) string, f sinkFeatures) (*Sinks, error) {
	return makeSinks(ctx, api, rs, len(rs), typeOf, func(i int, url string) (string, error) {
		id, err := api.CreateEndpointWith(ctx, url, maxInFlight, "", f.endpoint)
		if err != nil {
			return "", err
		}
		return api.SubscribeFiltered(ctx, id, f.filter, typeOf(i))
	})
}

// newConsumerSinks makes n endpoints spread over the receivers (endpoint i
// on receiver i mod len(rs), at a path of its own when n > len(rs)),
// endpoint i subscribed to typeOf(i) and belonging to the consumer
// consumerOf(i) (none when ""), which must exist.
func newConsumerSinks(ctx context.Context, api *Client, rs Receivers, n, maxInFlight int, typeOf, consumerOf func(i int) string) (*Sinks, error) {
	return makeSinks(ctx, api, rs, n, typeOf, func(i int, url string) (string, error) {
		id, err := api.CreateConsumerEndpoint(ctx, url, maxInFlight, consumerOf(i))
		if err != nil {
			return "", err
		}
		return api.Subscribe(ctx, id, typeOf(i))
	})
}

// makeSinks makes n endpoints spread over the receivers with create,
// which makes endpoint i at url, subscribed, and returns its
// subscription's id; on a failure it deletes what it made through api.
func makeSinks(ctx context.Context, api *Client, rs Receivers, n int, typeOf func(i int) string, create func(i int, url string) (string, error)) (*Sinks, error) {
	s := &Sinks{Types: make([]string, n), receivers: rs, base: make([]int, len(rs)), subscriptions: make([]string, n)}
	for i, r := range rs {
		s.base[i] = r.Count()
	}
	for i := range n {
		s.Types[i] = typeOf(i)
	}
	err := parallel(n, 8, func(i int) error {
		url := rs[i%len(rs)].URL()
		if n > len(rs) {
			url += fmt.Sprintf("/e%d", i)
		}
		var err error
		s.subscriptions[i], err = create(i, url)
		return err
	})
	if err != nil {
		s.Close(context.WithoutCancel(ctx), api)
		return nil, err
	}
	return s, nil
}

// Count is the number of requests received in this run, duplicates
// included.
func (s *Sinks) Count() int {
	n := 0
	for i, r := range s.receivers {
		n += r.Count() - s.base[i]
	}
	return n
}

// Requests returns every request received in this run.
func (s *Sinks) Requests() []receiver.Request {
	var out []receiver.Request
	for i, r := range s.receivers {
		out = append(out, r.Requests()[s.base[i]:]...)
	}
	return out
}

// Arrival is what the receivers got: distinct webhook-ids, redeliveries of
// an id already seen, and when the last distinct one arrived.
type Arrival struct {
	Unique, Duplicates int
	Last               time.Time
	First              []receiver.Request // the first request of each id
}

// Arrival tallies the requests received so far.
func (s *Sinks) Arrival() Arrival {
	reqs := s.Requests()
	slices.SortFunc(reqs, func(a, b receiver.Request) int { return a.At.Compare(b.At) })
	return arrival(reqs)
}

// arrival tallies reqs, in the order received.
func arrival(reqs []receiver.Request) Arrival {
	seen := make(map[string]bool, len(reqs))
	var a Arrival
	for _, r := range reqs {
		if seen[r.ID] {
			a.Duplicates++
			continue
		}
		seen[r.ID] = true
		a.Unique++
		a.Last = r.At
		a.First = append(a.First, r)
	}
	return a
}

// Await waits until want distinct deliveries have arrived or ctx ends, and
// returns the arrival either way.
func (s *Sinks) Await(ctx context.Context, want int) Arrival {
	lastCount := -1
	for {
		if n := s.Count(); n >= want && n != lastCount {
			lastCount = n
			if a := s.Arrival(); a.Unique >= want {
				return a
			}
		}
		select {
		case <-ctx.Done():
			return s.Arrival()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Close waits until no more requests arrive (up to 20 s) and deletes the
// subscriptions; the receivers stay for the next run. It returns a note when deliveries were
// still arriving.
func (s *Sinks) Close(ctx context.Context, api *Client) string {
	note := ""
	if n, settled := s.settle(ctx, time.Second, 20*time.Second); !settled {
		note = fmt.Sprintf("deliveries still arriving 20s after the run (%d so far)", n)
	}
	err := parallel(len(s.subscriptions), 8, func(i int) error {
		if s.subscriptions[i] == "" {
			return nil
		}
		return api.DeleteSubscription(ctx, s.subscriptions[i])
	})
	if err != nil {
		note = joinNotes(note, "deleting subscriptions: "+err.Error())
	}
	return note
}

// settle waits until the request count has not changed for quiet, for at
// most limit.
func (s *Sinks) settle(ctx context.Context, quiet, limit time.Duration) (int, bool) {
	deadline := time.Now().Add(limit)
	n, since := s.Count(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return n, false
		}
		time.Sleep(50 * time.Millisecond)
		if m := s.Count(); m != n {
			n, since = m, time.Now()
		}
	}
	return n, true
}

// parallel runs fn(0..n-1) on conc goroutines and returns the errors.
func parallel(n, conc int, fn func(i int) error) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range min(conc, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more errors", len(errs)-3))
	}
	return errors.Join(errs...)
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	default:
		return a + "; " + b
	}
}
