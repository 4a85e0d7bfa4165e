package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Pull delivery's idle cost: poll clients long-polling an endpoint that
// gets no events.

var pollIdleScenario = Scenario{
	Name:  "poll-idle",
	Title: "Pull delivery: 1,000 clients long-polling, idle",
	What: "One poll endpoint (delivery \"poll\") and 1,000 clients, each reading its poll URL in a loop with wait=30 " +
		"(each on a keep-alive connection of its own, loopback), started evenly over 30 s so that their re-polls spread " +
		"out: 1,000 clients each re-polling every 30 s is 33 requests/s. With no events, CPU is read from /proc over a " +
		"40 s window once every client has started (Sluice and the whole Postgres cluster, as in idle; the clients' CPU " +
		"is the benchmark's and not counted), so every client re-polls at least once in it; first, the same window with no " +
		"client, whose CPU is subtracted (what the clients add, as blocked does). Target: what they add ≤ 0.05 cores.",
	Run:            pollIdle,
	MinTimeout:     4 * time.Minute,
	NoWaitSampling: true,
}

func pollIdle(ctx context.Context, env *Env) (Table, error) {
	clients := env.size(1000, 100)
	ramp := time.Duration(env.size(30, 5)) * time.Second
	window := time.Duration(env.size(40, 10)) * time.Second
	label := fmt.Sprintf("%d waiting", clients)
	metrics := []Metric{
		{Name: "Sluice + Postgres, " + label + " − none", Unit: "cores", Target: 0.05, AtMost: true},
		{Name: "Sluice + Postgres, " + label, Unit: "cores"},
		{Name: "Sluice + Postgres, none", Unit: "cores"},
		{Name: "Sluice, " + label, Unit: "cores"},
		{Name: "Postgres, " + label, Unit: "cores"},
		{Name: "poll reads", Unit: "req/s"},
	}
	t, err := env.Repeat(ctx, metrics, func(ctx context.Context, run int) (s Sample, err error) {
		s.Values = map[string]float64{}
		pollURL, err := env.API.CreatePollEndpoint(ctx, fmt.Sprintf("bench.poll.r%d", run))
		if err != nil {
			return s, fmt.Errorf("set up the poll endpoint: %w", err)
		}
		// The same window with no client first: what the box's load
		// and Sluice's own idle work cost, for the difference.
		none := env.idleCPU(ctx, window)
		s.Values["Sluice + Postgres, none"] = none.cores(none.sluice + none.postgres)
		hc := &http.Client{Transport: &http.Transport{
			Proxy: nil, MaxIdleConns: clients, MaxIdleConnsPerHost: clients, IdleConnTimeout: 2 * time.Minute,
		}}
		defer hc.CloseIdleConnections()
		ctx, stop := context.WithCancel(ctx)
		var reads, failures atomic.Int64
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		for i := range clients {
			wg.Go(func() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(i) * ramp / time.Duration(clients)):
				}
				cursor := ""
				for ctx.Err() == nil {
					next, err := pollOnce(ctx, hc, pollURL+"?wait=30&cursor="+cursor)
					if err != nil {
						if ctx.Err() == nil {
							failures.Add(1)
							time.Sleep(time.Second)
						}
						continue
					}
					reads.Add(1)
					cursor = next
				}
			})
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(ramp + 2*time.Second):
		}
		before := reads.Load()
		use := env.idleCPU(ctx, window)
		s.Values["Sluice, "+label] = use.cores(use.sluice)
		s.Values["Postgres, "+label] = use.cores(use.postgres)
		s.Values["Sluice + Postgres, "+label] = use.cores(use.sluice + use.postgres)
		s.Values["Sluice + Postgres, "+label+" − none"] = use.cores(use.sluice+use.postgres) - none.cores(none.sluice+none.postgres)
		s.Values["poll reads"] = float64(reads.Load()-before) / use.wall.Seconds()
		s.CPU = use
		if f := failures.Load(); f > 0 {
			s.Note = fmt.Sprintf("%d poll reads failed", f)
		}
		if o := use.others(); o > 0.1 {
			s.Note = joinNotes(s.Note, fmt.Sprintf("other processes used %.2f cores during the window", o))
		}
		return s, nil
	})
	t.Notes = append(t.Notes, fmt.Sprintf("%d clients started over %s, then a %s window with no events", clients, ramp, window))
	return t, err
}

// pollOnce reads a poll URL once and returns the next cursor.
func pollOnce(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("new poll request: %w", err)
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET poll URL: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		return "", fmt.Errorf("GET poll URL: status %d: %s", res.StatusCode, msg)
	}
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil {
		return "", fmt.Errorf("decode the poll page: %w", err)
	}
	return page.NextCursor, nil
}

// CreatePollEndpoint makes a poll endpoint subscribed to typ and returns
// its poll URL.
func (c *Client) CreatePollEndpoint(ctx context.Context, typ string) (string, error) {
	var ep struct {
		ID      string `json:"id"`
		PollURL string `json:"poll_url"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/endpoints", map[string]any{"delivery": "poll"}, http.StatusCreated, &ep); err != nil {
		return "", err
	}
	if _, err := c.Subscribe(ctx, ep.ID, typ); err != nil {
		return "", err
	}
	return ep.PollURL, nil
}
