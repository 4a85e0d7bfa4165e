package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// The search scenario: the first page of each search of GET /v1/deliveries
// and GET /v1/events, and of the portal's consumer-scoped lists, over a
// tenant's deliveries seeded in bulk beside two other tenants' (search.go;
// the seed is in searchseed.go).

var searchScenario = Scenario{
	Name:  "search",
	Title: "Search: first pages over 10,000,000 deliveries of one tenant among 30,000,000",
	What: "Once, before the runs: the benchmark tenant gets 20 endpoints (8 of them of 4 consumers, 2 each) and two " +
		"more tenants 4 endpoints each (`sluice tenant create`, then the API); then, in SQL (as the retention scenario " +
		"seeds: `sluice_ensure_week` for each week, then INSERT … SELECT over generate_series, a statement per tenant " +
		"and chunk of at most 250,000 events, foreign keys unchecked as they hold by construction), -search-deliveries " +
		"deliveries in all (default 30,000,000; 300,000 with -quick), a third of them the benchmark tenant's and a third " +
		"each of the others': events spread evenly over the 13 days before now (six types: order.created, order.paid, " +
		"order.refunded, invoice.paid, invoice.failed, customer.updated; payload {seq, amount 0–999, note}), each " +
		"delivered to two of its tenant's endpoints; one delivery in 20 dead (last attempt 500, 503, 404 or 410, a " +
		"quarter each), the others delivered (200); one attempt each. Then VACUUM (ANALYZE) of the three tables. No " +
		"delivery is queued and nothing is subscribed, so Sluice delivers nothing. Each run then times, at the client, " +
		"-search-requests (default 40; 20 with -quick) requests of each search, one at a time over keep-alive, each with a " +
		"time window drawn at random where the search has one: deliveries since/until (a random day), status_code 404, " +
		"status_code 500-599, event_type invoice.failed, event_type invoice.*, consumer (one of 4), all of a day's dead " +
		"order.* answered 5xx; events since/until (a day), type invoice.paid, type order.*, filter {\"amount\": " +
		"{\"$gte\": 990}}; the portal's dead list (a consumer's session, GET /dead, paced at one a second, within the session's rate) by " +
		"type invoice.* and by a day answered 500-599. Each request asks for the first page (limit 50 on the API, the " +
		"page's own 50 on the portal) and must get a non-empty one. Target: p95 ≤ 300 ms for each search.",
	Run: searchRun,
	// Seeding 30,000,000 deliveries with their events and attempts and
	// analysing them takes most of an hour on a small machine; the runs
	// themselves take seconds.
	MinTimeout: 5 * time.Minute,
}

const searchTarget = 300 // ms, p95 of each search's first page

// searchCase is one search: the request path of a run's i-th request.
type searchCase struct {
	name   string
	portal bool // through the portal's session, not the API
	path   func(rnd *rand.Rand, w searchWindow) string
}

// searchWindow is the seeded time span.
type searchWindow struct{ from, to time.Time }

// day is a random day within the span, as since and until.
func (w searchWindow) day(rnd *rand.Rand) (since, until string) {
	span := w.to.Sub(w.from) - 24*time.Hour
	s := w.from.Add(time.Duration(rnd.Int64N(int64(span)))).UTC().Truncate(time.Second)
	return s.Format(time.RFC3339), s.Add(24 * time.Hour).Format(time.RFC3339)
}

func searchCases(consumers []string) []searchCase {
	q := func(path string, kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return path + "?" + v.Encode()
	}
	fixed := func(path string, kv ...string) func(*rand.Rand, searchWindow) string {
		return func(*rand.Rand, searchWindow) string { return q(path, kv...) }
	}
	return []searchCase{
		{name: "deliveries, since/until (a day)", path: func(rnd *rand.Rand, w searchWindow) string {
			s, u := w.day(rnd)
			return q("/v1/deliveries", "limit", "50", "since", s, "until", u)
		}},
		{name: "deliveries, status_code 404", path: fixed("/v1/deliveries", "limit", "50", "status_code", "404")},
		{name: "deliveries, status_code 500-599", path: fixed("/v1/deliveries", "limit", "50", "status_code", "500-599")},
		{name: "deliveries, event_type exact", path: fixed("/v1/deliveries", "limit", "50", "event_type", "invoice.failed")},
		{name: "deliveries, event_type prefix", path: fixed("/v1/deliveries", "limit", "50", "event_type", "invoice.*")},
		{name: "deliveries, consumer", path: func(rnd *rand.Rand, _ searchWindow) string {
			return q("/v1/deliveries", "limit", "50", "consumer", consumers[rnd.IntN(len(consumers))])
		}},
		{name: "deliveries, a day's order.* answered 5xx", path: func(rnd *rand.Rand, w searchWindow) string {
			s, u := w.day(rnd)
			return q("/v1/deliveries", "limit", "50", "since", s, "until", u, "event_type", "order.*", "status_code", "500-599")
		}},
		{name: "events, since/until (a day)", path: func(rnd *rand.Rand, w searchWindow) string {
			s, u := w.day(rnd)
			return q("/v1/events", "limit", "50", "since", s, "until", u)
		}},
		{name: "events, type exact", path: fixed("/v1/events", "limit", "50", "type", "invoice.paid")},
		{name: "events, type prefix", path: fixed("/v1/events", "limit", "50", "type", "order.*")},
		{name: "events, payload filter", path: fixed("/v1/events", "limit", "50", "filter", `{"amount": {"$gte": 990}}`)},
		{name: "portal, dead by type prefix", portal: true, path: fixed("/dead", "type", "invoice.*")},
		{name: "portal, dead of a day answered 5xx", portal: true, path: func(rnd *rand.Rand, w searchWindow) string {
			// A day's window, in the datetime-local form the page's inputs send.
			s := w.from.Add(time.Duration(rnd.Int64N(int64(w.to.Sub(w.from) - 24*time.Hour)))).UTC()
			return q("/dead", "since", s.Format("2006-01-02T15:04"), "until", s.Add(24*time.Hour).Format("2006-01-02T15:04"),
				"status_code", "500-599")
		}},
	}
}

func searchMetrics(cases []searchCase) []Metric {
	var ms []Metric
	for _, c := range cases {
		ms = append(ms, Metric{Name: c.name + ": p95", Unit: "ms", Target: searchTarget, AtMost: true})
	}
	for _, c := range cases {
		ms = append(ms, Metric{Name: c.name + ": p50", Unit: "ms"})
	}
	return ms
}

func searchRun(ctx context.Context, env *Env) (Table, error) {
	total := env.SearchDeliveries
	if total == 0 {
		total = env.size(30_000_000, 300_000)
	}
	requests := env.SearchRequests
	if requests == 0 {
		requests = env.size(40, 20)
	}
	var t Table
	seeded, err := seedSearch(ctx, env, total)
	if err != nil {
		return t, err
	}
	t.Notes = append(t.Notes, seeded.note())
	cases := searchCases(seeded.consumers)
	portal, err := portalSession(ctx, env, seeded.consumers[0])
	if err != nil {
		return t, err
	}
	rt, err := env.Repeat(ctx, searchMetrics(cases), func(ctx context.Context, run int) (Sample, error) {
		s := Sample{Values: map[string]float64{}}
		rnd := rand.New(rand.NewPCG(uint64(run), 41))
		for _, c := range cases {
			lat := make([]time.Duration, 0, requests)
			for range requests {
				path := c.path(rnd, seeded.window)
				var took time.Duration
				var err error
				if c.portal {
					took, err = portal.get(ctx, path)
				} else {
					took, err = apiSearch(ctx, env.API, path)
				}
				if err != nil {
					return s, fmt.Errorf("%s: %w", c.name, err)
				}
				lat = append(lat, took)
			}
			s.Values[c.name+": p95"] = ms(percentile(lat, 95))
			s.Values[c.name+": p50"] = ms(percentile(lat, 50))
		}
		return s, nil
	})
	rt.Notes = append(t.Notes, rt.Notes...)
	return rt, err
}

// apiSearch is one GET of a list of the API, which must be a page with
// rows; it returns the round trip.
func apiSearch(ctx context.Context, c *Client, path string) (time.Duration, error) {
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	start := time.Now()
	if err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if len(page.Data) == 0 {
		return took, fmt.Errorf("GET %s: an empty page", path)
	}
	return took, nil
}

// portalPace is the time between two requests of the portal session: the
// dead-letter page costs 5 tokens of a session's 5/s (dashboard.heavyCost).
const portalPace = 1050 * time.Millisecond

// portalClient is a consumer's portal session: a cookie jar, paced to stay
// within the session's rate.
type portalClient struct {
	base string
	http *http.Client
	next time.Time
}

// portalSession opens a portal link of consumer uid (POST
// /v1/consumers/{uid}/portal) and keeps the session it signs in to.
func portalSession(ctx context.Context, env *Env, uid string) (*portalClient, error) {
	var link struct {
		URL string `json:"url"`
	}
	if err := env.API.do(ctx, http.MethodPost, "/v1/consumers/"+uid+"/portal", map[string]any{}, http.StatusCreated, &link); err != nil {
		return nil, fmt.Errorf("create a portal link: %w", err)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		return nil, fmt.Errorf("portal link %q: %w", link.URL, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, fmt.Errorf("cookie jar: %w", err)
	}
	p := &portalClient{base: env.API.base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}}
	if _, err := p.get(ctx, u.RequestURI()); err != nil {
		return nil, fmt.Errorf("open the portal link: %w", err)
	}
	return p, nil
}

// get is one GET of a portal page, which must list deliveries; it waits
// first until the session's rate allows it, and returns the round trip.
func (p *portalClient) get(ctx context.Context, path string) (time.Duration, error) {
	select {
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for the portal's rate: %w", ctx.Err())
	case <-time.After(time.Until(p.next)):
	}
	p.next = time.Now().Add(portalPace)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	start := time.Now()
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("GET %s: read: %w", path, err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return took, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	if strings.Contains(path, "token=") { // the sign-in: lands on a page of the portal
		return took, nil
	}
	if !strings.Contains(string(body), `href="/deliveries/`) {
		return took, fmt.Errorf("GET %s: no delivery listed", path)
	}
	return took, nil
}
