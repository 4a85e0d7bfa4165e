package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/jobs"
)

// The filters scenario measures what payload filters cost routing: 100
// endpoints, each with a filter on its subscription that matches about half
// the events, against the same posts to the same endpoints without
// filters (twice the deliveries), and against unfiltered subscriptions
// that make as many deliveries as the filters let through (the cost of
// evaluating the filters alone).

var filtersScenario = Scenario{
	Name:  "filters",
	Title: "Payload filters, 100 endpoints",
	What: "100 loopback receivers, one endpoint each (max_in_flight 100). Single posts (POST /v1/events, 8 clients) and " +
		"batches (/v1/events/batch, 100 events a request, 4 clients) of ~250-byte payloads, each event reaching every " +
		"endpoint by type, in three setups in turn: every subscription with a filter (six shapes: a range, $in, " +
		"equality, $prefix on items.0.sku, $or of $and, $not with $exists), each matching about half the events; the " +
		"same subscriptions without filters; and unfiltered subscriptions split over two types so that each event " +
		"reaches 50 endpoints (as many deliveries as the filters let through). Routed = events ÷ (first request sent → " +
		"no fan-out job left), the deliveries made inline or by fan-out jobs; the ratios divide those times, filtered " +
		"by unfiltered (target ≤ 1.2×). Each setup waits for every delivery and checks that the receivers got exactly " +
		"what the Go reference evaluator (internal/filter) says.",
	MinTimeout: 10 * time.Minute,
	Run:        filtersRun,
}

const filterEndpoints = 100

// filterSetup is one of the three ways the endpoints are subscribed.
type filterSetup int

const (
	setupUnfiltered filterSetup = iota // every endpoint to the type, no filter
	setupFiltered                      // every endpoint to the type, with a filter
	setupHalf                          // half the endpoints to each of two types, no filter
)

func (s filterSetup) String() string {
	return [...]string{"unfiltered", "filtered", "unfiltered at equal deliveries"}[s]
}

func filterMetrics() []Metric {
	var ms []Metric
	for _, mode := range []string{"single", "batch"} {
		for _, s := range []filterSetup{setupFiltered, setupUnfiltered, setupHalf} {
			ms = append(ms, Metric{Name: mode + ": routed, " + s.String(), Unit: "events/s"})
		}
		ms = append(ms,
			Metric{Name: mode + ": accepted, filtered", Unit: "events/s"},
			Metric{Name: mode + ": accepted, unfiltered", Unit: "events/s"},
			Metric{Name: mode + ": routed time, filtered ÷ unfiltered", Unit: "×", Target: 1.2, AtMost: true},
			Metric{Name: mode + ": routed time, filtered ÷ equal deliveries", Unit: "×"},
		)
	}
	return ms
}

func filtersRun(ctx context.Context, env *Env) (Table, error) {
	const maxInFlight = 100
	receivers := newReceivers(filterEndpoints)
	defer receivers.Close()
	filters := make([]*filter.Filter, filterEndpoints)
	for i := range filters {
		f, err := filter.Parse(benchFilter(i))
		if err != nil {
			return Table{}, fmt.Errorf("bench filter %d: %w", i, err)
		}
		filters[i] = f
	}
	singles, batched := env.size(600, 200), env.size(600, 200)
	t, err := env.Repeat(ctx, filterMetrics(), func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		for _, mode := range []string{"single", "batch"} {
			events, perRequest, clients := singles, 1, 8
			if mode == "batch" {
				events, perRequest, clients = batched, 100, 4
			}
			elapsed := map[filterSetup]time.Duration{}
		setups:
			for _, setup := range []filterSetup{setupUnfiltered, setupFiltered, setupHalf} {
				// The previous setup's deliveries are done (filterRound
				// waits for them); let Postgres settle too.
				if note := env.quiesce(ctx, 60*time.Second); note != "" {
					s.Note = joinNotes(s.Note, note)
				}
				if note := env.waitIdle(ctx, 10*time.Second); note != "" {
					s.Note = joinNotes(s.Note, note)
				}
				label := fmt.Sprintf("bench.filters.r%d.%s.%d", run, mode, setup)
				res, routed, note, err := filterRound(ctx, env, receivers, filters, setup, label, events, perRequest, clients, maxInFlight)
				s.Note = joinNotes(s.Note, note)
				if err != nil {
					// The mode's readings are left out (they compare only
					// within a run), the other mode's still taken.
					s.Note = joinNotes(s.Note, fmt.Sprintf("%s, %s: %v", mode, setup, err))
					delete(elapsed, setupUnfiltered)
					break setups
				}
				elapsed[setup] = routed
				s.Values[mode+": routed, "+setup.String()] = float64(events) / routed.Seconds()
				switch setup {
				case setupFiltered:
					s.Values[mode+": accepted, filtered"] = float64(events) / res.end.Sub(res.start).Seconds()
				case setupUnfiltered:
					s.Values[mode+": accepted, unfiltered"] = float64(events) / res.end.Sub(res.start).Seconds()
				}
			}
			if len(elapsed) == 3 {
				s.Values[mode+": routed time, filtered ÷ unfiltered"] = elapsed[setupFiltered].Seconds() / elapsed[setupUnfiltered].Seconds()
				s.Values[mode+": routed time, filtered ÷ equal deliveries"] = elapsed[setupFiltered].Seconds() / elapsed[setupHalf].Seconds()
			}
		}
		s.TimedOut = timedOut(ctx)
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d single posts and %d events in batches of 100 per setup and run, over %d endpoints, max_in_flight %d",
		singles, batched, filterEndpoints, maxInFlight))
	return t, err
}

// filterRound subscribes the endpoints as setup says, posts the events, and
// returns the posting and the time from the first request to the last
// fan-out job done; then it waits for every delivery and checks their
// number against the reference evaluator.
func filterRound(ctx context.Context, env *Env, rs Receivers, filters []*filter.Filter, setup filterSetup, label string,
	events, perRequest, clients, maxInFlight int) (res postResult, routed time.Duration, note string, err error) {
	typeOf := func(i int) string { return label }
	if setup == setupHalf {
		typeOf = func(i int) string { return label + "." + strconv.Itoa(i%2) }
	}
	var filterOf func(i int) json.RawMessage
	if setup == setupFiltered {
		filterOf = func(i int) json.RawMessage { return benchFilter(i) }
	}
	sinks, err := newFilteredSinks(ctx, env.API, rs, maxInFlight, typeOf, filterOf)
	if err != nil {
		return res, 0, "", fmt.Errorf("set up endpoints: %w", err)
	}
	defer func() { note = joinNotes(note, sinks.Close(context.WithoutCancel(ctx), env.API)) }()

	want, most := 0, 0 // deliveries expected in all, and the most one request makes
	var bodies [][]byte
	post := env.API.PostBatch
	for first := 0; first < events; first += perRequest {
		evs := make([]EventIn, min(perRequest, events-first))
		n := 0
		for j := range evs {
			k := first + j
			evs[j] = EventIn{Type: typeOf(k), Payload: filterPayload(k)}
			n += expectedDeliveries(setup, filters, evs[j].Payload)
		}
		want, most = want+n, max(most, n)
		if perRequest == 1 {
			bodies, post = append(bodies, eventBody(evs[0])), env.API.PostEvent
			continue
		}
		bodies = append(bodies, batchBody(evs))
	}
	res = postAll(ctx, bodies, clients, post)
	// On a machine too busy for a post to commit within its bound (503),
	// the run goes on, noted: a failed post may or may not have made its
	// deliveries, so the count is checked within bounds.
	least := want
	if res.failed > 0 {
		if res.ok == 0 {
			return res, 0, "", fmt.Errorf("posting events: %s", res.note())
		}
		least = max(0, want-res.failed*most)
		defer func() { note = joinNotes(note, label+": "+res.note()) }()
	}
	for {
		left, err := jobs.CountLive(ctx, env.DB, []string{jobs.QueueFanout}, nil)
		if err != nil {
			return res, 0, "", fmt.Errorf("count fan-out jobs: %w", err)
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, 0, "", fmt.Errorf("fan-out not done: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	routed = time.Since(res.start)
	// Every endpoint's delivery of an event carries the event's id, so
	// deliveries are told apart per receiver (one endpoint each).
	for {
		if sinks.Count() >= least {
			if got, _ := distinctDeliveries(sinks); got >= least {
				break
			}
		}
		select {
		case <-ctx.Done():
			got, _ := distinctDeliveries(sinks)
			return res, routed, "", fmt.Errorf("%d of %d deliveries arrived: %w", got, least, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	sinks.settle(ctx, time.Second, 10*time.Second)
	if got, _ := distinctDeliveries(sinks); got < least || got > want {
		return res, routed, "", fmt.Errorf("the receivers got %d distinct deliveries, the reference evaluator expects %d (at least %d)", got, want, least)
	}
	return res, routed, "", nil
}

// distinctDeliveries counts the distinct deliveries the receivers got in
// this run (a webhook id once per receiver), and all their requests.
func distinctDeliveries(s *Sinks) (distinct, requests int) {
	for i, r := range s.receivers {
		reqs := r.Requests()[s.base[i]:]
		seen := make(map[string]bool, len(reqs))
		for _, q := range reqs {
			seen[q.ID] = true
		}
		distinct, requests = distinct+len(seen), requests+len(reqs)
	}
	return distinct, requests
}

// expectedDeliveries is how many endpoints an event reaches in setup.
func expectedDeliveries(setup filterSetup, filters []*filter.Filter, payload json.RawMessage) int {
	switch setup {
	case setupUnfiltered:
		return filterEndpoints
	case setupHalf:
		return filterEndpoints / 2
	}
	n := 0
	for _, f := range filters {
		if ok, err := f.Match(payload); err == nil && ok {
			n++
		}
	}
	return n
}

// benchFilter is endpoint i's filter: six shapes, each matching about half
// of filterPayload's events.
func benchFilter(i int) json.RawMessage {
	shapes := []string{
		`{"amount": {"$gte": 500}}`,
		`{"customer.tier": {"$in": ["gold", "platinum"]}}`,
		`{"currency": "eur"}`,
		`{"items.0.sku": {"$prefix": "BK-"}}`,
		`{"$or": [{"customer.tier": "gold"}, {"$and": [{"currency": "usd"}, {"amount": {"$lt": 500}}]}]}`,
		`{"$not": {"amount": {"$lt": 500}}, "customer.id": {"$exists": true}}`,
	}
	return json.RawMessage(shapes[i%len(shapes)])
}

// filterPayload is event k's payload, about 250 bytes: a customer of one
// of four tiers, an amount spread over 0–999, one of two currencies, and
// items whose first SKU is a book or a CD.
func filterPayload(k int) json.RawMessage {
	tiers := []string{"gold", "silver", "platinum", "bronze"}
	sku := "CD-"
	if (k/2)%2 == 0 {
		sku = "BK-"
	}
	b, _ := json.Marshal(map[string]any{
		"seq":      k,
		"customer": map[string]any{"id": "cus_" + strconv.Itoa(100000+k%900000), "tier": tiers[k%4]},
		"amount":   (k * 37) % 1000,
		"currency": []string{"eur", "usd"}[k%2],
		"items":    []any{map[string]any{"sku": sku + strconv.Itoa(k%1000), "qty": 1 + k%3}, map[string]any{"sku": "GF-1", "qty": 1}},
		"note":     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	})
	return b
}

// newFilteredSinks makes one endpoint per receiver, endpoint i subscribed
// to typeOf(i) with the filter filterOf(i) (none when filterOf is nil).
func newFilteredSinks(ctx context.Context, api *Client, rs Receivers, maxInFlight int, typeOf func(i int) string, filterOf func(i int) json.RawMessage) (*Sinks, error) {
	n := len(rs)
	s := &Sinks{Types: make([]string, n), receivers: rs, base: make([]int, n), subscriptions: make([]string, n)}
	for i, r := range rs {
		s.base[i] = r.Count()
		s.Types[i] = typeOf(i)
	}
	err := parallel(n, 8, func(i int) error {
		id, err := api.CreateEndpoint(ctx, rs[i].URL(), maxInFlight)
		if err != nil {
			return err
		}
		var f json.RawMessage
		if filterOf != nil {
			f = filterOf(i)
		}
		s.subscriptions[i], err = api.SubscribeFiltered(ctx, id, f, s.Types[i])
		return err
	})
	if err != nil {
		s.Close(context.WithoutCancel(ctx), api)
		return nil, err
	}
	return s, nil
}
