package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Rate limits across worker processes: rate-limited endpoints with a
// backlog, delivered by two `serve --worker` processes sharing each
// endpoint's token bucket in Postgres.

var rateLimitScenario = Scenario{
	Name:  "ratelimit-2w",
	Title: "Rate limits stay exact with 2 worker processes",
	What: "Sluice runs as `serve --api --dashboard` beside 2 `serve --worker` processes, whatever -workers says. " +
		"4 loopback receivers, one endpoint each (max_in_flight 50), rate limits 50, 100, 200 and 200 per second " +
		"with burst = rate, each subscribed to its own event type. Up front, burst + 12 s × rate events per endpoint " +
		"are posted to /v1/events/batch (1,000 per request, the types interleaved), so each endpoint has a backlog " +
		"for ~12 s. The receiver records the arrival time of every request (duplicates included). Per endpoint: the " +
		"most requests in any one-second window [t, t + 1 s), with every arrival as a window start, against " +
		"burst + rate (judged on every run); and the achieved rate over the steady part — from 1 s after the first " +
		"arrival (the burst spent) to the arrival after which only rate requests (1 s worth) were left — as a % of " +
		"the rate (≥ 95%, judged on the median), and the most requests in any one-second window within the " +
		"steady part (about rate with an exact bucket; more would mean tokens gained, e.g. when a job moved to " +
		"the other process, even within burst + rate). From River's jobs: how many worker processes ran the endpoints' " +
		"dispatch jobs, how many endpoints were sent to from both, and how many pairs of one endpoint's job runs " +
		"overlapped in time. At the end of a run the endpoints are disabled and their subscriptions deleted.",
	Run:        rateLimit2W,
	MinTimeout: 90 * time.Second,
	Workers:    2,
}

// rateEndpoint is one rate-limited endpoint of the scenario.
type rateEndpoint struct{ rate, burst int }

var rateEndpoints = []rateEndpoint{{50, 50}, {100, 100}, {200, 200}, {200, 200}}

const rateMaxInFlight = 50

func (e rateEndpoint) label(i int) string {
	return fmt.Sprintf("ep%d %d/s burst %d", i+1, e.rate, e.burst)
}

func rateMetrics() []Metric {
	var ms []Metric
	for i, e := range rateEndpoints {
		ms = append(ms,
			Metric{Name: e.label(i) + ": max in any 1 s", Unit: "requests", Target: float64(e.burst + e.rate), AtMost: true, Worst: true},
			Metric{Name: e.label(i) + ": achieved rate", Unit: "% of rate", Target: 95},
			Metric{Name: e.label(i) + ": max in any 1 s, steady part", Unit: "requests"})
	}
	return append(ms,
		Metric{Name: "backlog queued", Unit: "s"},
		Metric{Name: "last delivery", Unit: "s"},
		Metric{Name: "worker processes that ran dispatch jobs", Unit: "processes"},
		Metric{Name: "endpoints sent to from both workers", Unit: "endpoints"},
		Metric{Name: "overlapping dispatch runs of one endpoint", Unit: "pairs"},
	)
}

func rateLimit2W(ctx context.Context, env *Env) (Table, error) {
	backlog := env.size(12, 4) // seconds of backlog at each endpoint's rate
	receivers := newReceivers(len(rateEndpoints))
	defer receivers.Close()
	t, err := env.Repeat(ctx, rateMetrics(), func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		ids, subs, err := makeRateEndpoints(ctx, env.API, receivers, run)
		defer func() { s.Note = joinNotes(s.Note, dropRateEndpoints(context.WithoutCancel(ctx), env.API, ids, subs)) }()
		if err != nil {
			return s, err
		}
		base, want := make([]int, len(receivers)), make([]int, len(receivers))
		for i, r := range receivers {
			base[i], want[i] = r.Count(), rateEndpoints[i].burst+backlog*rateEndpoints[i].rate
		}
		start := time.Now()
		if err := postRateBacklog(ctx, env.API, run, want); err != nil {
			return s, err
		}
		if queued, ok := awaitQueued(ctx, env, ids, sum(want)); ok {
			s.Values["backlog queued"] = queued.Sub(start).Seconds()
		}
		s.TimedOut = !awaitCounts(ctx, receivers, base, want)
		settleCounts(ctx, receivers, 500*time.Millisecond, 5*time.Second)
		var last time.Time
		for i, r := range receivers {
			reqs := r.Requests()[base[i]:]
			at := make([]time.Time, len(reqs))
			seen, dups := map[string]bool{}, 0
			for k, q := range reqs {
				at[k] = q.At
				if seen[q.ID] {
					dups++
				}
				seen[q.ID] = true
			}
			e := rateEndpoints[i]
			c := checkRate(at, e.rate)
			s.Values[e.label(i)+": max in any 1 s"] = float64(c.MaxWindow)
			if a := c.Achieved(2 * time.Second); a > 0 {
				s.Values[e.label(i)+": achieved rate"] = 100 * a / float64(e.rate)
				s.Values[e.label(i)+": max in any 1 s, steady part"] = float64(c.SteadyMaxWindow)
			}
			if len(at) > 0 {
				if at[len(at)-1].After(last) {
					last = at[len(at)-1]
				}
				s.Note = joinNotes(s.Note, fmt.Sprintf("ep%d: %d requests, busiest second from +%.2fs, steady %.1fs",
					i+1, len(at), c.WindowAt.Sub(start).Seconds(), c.SteadyTo.Sub(c.SteadyFrom).Seconds()))
			}
			if dups > 0 {
				s.Note = joinNotes(s.Note, fmt.Sprintf("ep%d: %d duplicate deliveries", i+1, dups))
			}
			if len(reqs) < want[i] {
				s.Note = joinNotes(s.Note, fmt.Sprintf("ep%d: only %d of %d deliveries arrived", i+1, len(reqs), want[i]))
			}
		}
		if !last.IsZero() {
			s.Values["last delivery"] = last.Sub(start).Seconds()
		}
		d, err := readDispatchSpread(ctx, env, ids)
		if err != nil {
			return s, fmt.Errorf("read the dispatch jobs: %w", err)
		}
		s.Values["worker processes that ran dispatch jobs"] = float64(len(d.perClient))
		s.Values["endpoints sent to from both workers"] = float64(d.both)
		s.Values["overlapping dispatch runs of one endpoint"] = float64(d.overlaps)
		s.Note = joinNotes(s.Note, fmt.Sprintf("dispatch job runs per worker process: %v", d.perClient))
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d endpoints, backlog of burst + %d s × rate events each, per run; "+
		"sluice ran with 2 `serve --worker` processes", len(rateEndpoints), backlog))
	return t, err
}

// makeRateEndpoints creates endpoint i of rateEndpoints on receiver i,
// subscribed to rateType(run, i). It returns the ids it made, on error too.
func makeRateEndpoints(ctx context.Context, api *Client, rs Receivers, run int) (ids, subs []string, err error) {
	ids, subs = make([]string, len(rs)), make([]string, len(rs))
	for i, e := range rateEndpoints {
		var ep struct {
			ID string `json:"id"`
		}
		body := map[string]any{
			"url":           fmt.Sprintf("%s/r%d", rs[i].URL(), run),
			"max_in_flight": rateMaxInFlight,
			"rate_limit":    map[string]int{"per_second": e.rate, "burst": e.burst},
		}
		if err := api.do(ctx, http.MethodPost, "/v1/endpoints", body, http.StatusCreated, &ep); err != nil {
			return ids, subs, fmt.Errorf("create endpoint %d: %w", i+1, err)
		}
		ids[i] = ep.ID
		if subs[i], err = api.Subscribe(ctx, ep.ID, rateType(run, i)); err != nil {
			return ids, subs, fmt.Errorf("subscribe endpoint %d: %w", i+1, err)
		}
	}
	return ids, subs, nil
}

func rateType(run, i int) string { return fmt.Sprintf("bench.ratelimit.r%d.%d", run, i) }

// dropRateEndpoints deletes the subscriptions and disables the endpoints,
// so that what a timed-out run left queued costs later runs nothing (the
// quiescence check ignores disabled endpoints). It returns a note on error.
func dropRateEndpoints(ctx context.Context, api *Client, ids, subs []string) string {
	err := parallel(len(ids), 4, func(i int) error {
		if subs[i] != "" {
			if err := api.DeleteSubscription(ctx, subs[i]); err != nil {
				return err
			}
		}
		if ids[i] == "" {
			return nil
		}
		return api.do(ctx, http.MethodPatch, "/v1/endpoints/"+ids[i], map[string]any{"disabled": true}, http.StatusOK, nil)
	})
	if err != nil {
		return "removing the endpoints: " + err.Error()
	}
	return ""
}

// postRateBacklog posts want[i] events of rateType(run, i), interleaved, in
// batches of 1,000.
func postRateBacklog(ctx context.Context, api *Client, run int, want []int) error {
	var evs []EventIn
	for k := 0; len(evs) < sum(want); k++ {
		for i, n := range want {
			if k < n {
				evs = append(evs, EventIn{Type: rateType(run, i), Payload: payload(0, k)})
			}
		}
	}
	for len(evs) > 0 {
		n := min(len(evs), 1000)
		if err := api.PostBatch(ctx, batchBody(evs[:n])); err != nil {
			return fmt.Errorf("post the backlog: %w", err)
		}
		evs = evs[n:]
	}
	return nil
}
