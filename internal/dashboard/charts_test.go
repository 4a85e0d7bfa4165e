package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/dispatchtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// attempt inserts one attempt of a delivery directly, as RecordOutcomes
// stores it; status 0 is no response.
func (b *bundle) attempt(s seeded, at time.Time, status, latencyMS int) {
	b.t.Helper()
	var code *int
	if status != 0 {
		code = &status
	}
	_, err := b.store.Pool().Exec(context.Background(), `
		INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, error, latency_ms)
		VALUES ($1, $2, $6, $3, $4, CASE WHEN $4::int IS NULL THEN 'connection refused' END, $5)`,
		s.delivery.ID, s.endpoint.ID, at, code, latencyMS, s.delivery.EventID)
	require.NoError(b.t, err)
}

// history gives an endpoint a day of made-up attempts (of its seeded
// delivery), about three a minute: mostly 2xx, some 429s and failures, an
// outage of 5xx about six hours ago, latency that wanders with some slow
// ones; for the charts of the screenshots.
func (b *bundle) history(s seeded) {
	b.t.Helper()
	_, err := b.store.Pool().Exec(context.Background(), `
		INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, at, status_code, error, latency_ms)
		SELECT $1, $2, $3, now() - g * interval '20 seconds' - random() * interval '15 seconds',
		       CASE WHEN g BETWEEN 1000 AND 1090 OR g % 37 = 0 THEN 503
		            WHEN g % 23 = 0 THEN 429
		            WHEN g % 61 = 0 THEN NULL
		            ELSE 200 END,
		       CASE WHEN g % 61 = 0 THEN 'connection refused' END,
		       (120 + 60 * sin(g / 90.0) + random() * 50 + CASE WHEN g % 11 = 0 THEN 300 + random() * 400 ELSE 0 END)::int
		FROM generate_series(1, 4300) g
		WHERE g % 200 NOT BETWEEN 150 AND 170 OR g < 200`,
		s.delivery.ID, s.endpoint.ID, s.delivery.EventID)
	require.NoError(b.t, err)
}

// svgOf is the SVG element with id on a page.
func svgOf(t *testing.T, p page, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(p.Body, `id="`+id+`"`)
	require.True(t, ok, "the page has no #%s", id)
	svg, _, ok := strings.Cut(rest, "</svg>")
	require.True(t, ok)
	return svg
}

// TestEndpointCharts: the endpoint page draws its attempts of the last hour
// per minute and of the last day per half hour as SVG, with each bucket's
// counts (2xx delivered, 429 throttled, anything else or no response
// failed) and latency percentiles in words, and leaves out other
// endpoints' attempts and those outside each range.
func TestEndpointCharts(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/charts", false)
	other := b.seed(b.tenantA, "https://hooks.acme.test/other", false)
	now := time.Date(2031, 5, 6, 12, 34, 20, 0, time.UTC)
	b.setClock(now)
	at := func(hh, mm, ss int) time.Time { return time.Date(2031, 5, 6, hh, mm, ss, 0, time.UTC) }

	b.attempt(s, at(12, 30, 5), 200, 100)
	b.attempt(s, at(12, 30, 10), 204, 200)
	b.attempt(s, at(12, 30, 50), 500, 300)
	b.attempt(s, at(12, 31, 0), 429, 50)
	b.attempt(s, at(12, 31, 30), 0, 1050)
	b.attempt(s, at(11, 34, 59), 200, 80)         // the day's, not the hour's
	b.attempt(s, at(11, 0, 0), 404, 70)           // the day's
	b.attempt(s, now.Add(-25*time.Hour), 200, 90) // neither
	b.attempt(other, at(12, 30, 20), 500, 5000)   // another endpoint's
	b.attempt(other, at(12, 31, 20), 200, 5000)   // another endpoint's

	br := b.browser()
	br.login(b.keyA)
	p := br.get("/endpoints/" + s.endpoint.ID.String())
	require.Equal(t, http.StatusOK, p.Status)

	hour := svgOf(t, p, "chart-hour-counts")
	require.Contains(t, hour, `role="img"`)
	require.Contains(t, hour, `<title id="chart-hour-counts-title">Attempts per minute, last hour, by outcome</title>`)
	require.Contains(t, hour, `<desc id="chart-hour-counts-desc">5 attempts from 2031-05-06 11:35:00 UTC to 2031-05-06 12:35:00 UTC: 2 delivered, 2 failed, 1 throttled.</desc>`)
	require.Equal(t, 2, strings.Count(hour, `<g class="bar">`), "one bar per minute with attempts")
	require.Contains(t, hour, `<title>2031-05-06 12:30–12:31 UTC: 2 delivered, 1 failed, 0 throttled</title>`)
	require.Contains(t, hour, `<title>2031-05-06 12:31–12:32 UTC: 0 delivered, 1 failed, 1 throttled</title>`)
	for _, label := range []string{">11:45</text>", ">12:00</text>", ">12:15</text>", ">12:30</text>", ">5</text>", ">0</text>"} {
		require.Contains(t, hour, label, "axis label")
	}
	require.NotContains(t, hour, ">12:35</text>", "no tick after now")
	require.NotContains(t, hour, ">11:35</text>", "ticks on round minutes only")
	require.Equal(t, 1, strings.Count(hour, `class="bar-throttled"`))
	require.Equal(t, 2, strings.Count(hour, `class="bar-failed"`))

	hourLatency := svgOf(t, p, "chart-hour-latency")
	require.Contains(t, hourLatency, `<title>2031-05-06 12:30–12:31 UTC: p50 200 ms, p95 290 ms</title>`)
	require.Contains(t, hourLatency, `<title>2031-05-06 12:31–12:32 UTC: p50 550 ms, p95 1000 ms</title>`)
	require.Contains(t, hourLatency, `p50 from 200 ms to 550 ms, p95 from 290 ms to 1000 ms.`)
	require.Contains(t, hourLatency, ">1000 ms</text>", "the axis tops at the highest p95, rounded up to 1, 2 or 5 times a power of ten")
	require.NotContains(t, hourLatency, "5000")

	day := svgOf(t, p, "chart-day-counts")
	require.Contains(t, day, `7 attempts from 2031-05-05 13:00:00 UTC to 2031-05-06 13:00:00 UTC: 3 delivered, 3 failed, 1 throttled.`)
	require.Equal(t, 3, strings.Count(day, `<g class="bar">`))
	require.Contains(t, day, `<title>2031-05-06 12:30–13:00 UTC: 2 delivered, 2 failed, 1 throttled</title>`)
	require.Contains(t, day, `<title>2031-05-06 11:30–12:00 UTC: 1 delivered, 0 failed, 0 throttled</title>`)
	require.Contains(t, day, `<title>2031-05-06 11:00–11:30 UTC: 0 delivered, 1 failed, 0 throttled</title>`)
	// The day crosses midnight: its first tick and the first of the new
	// day carry the date; the range's end, in the future, has no tick;
	// ticks fall every six hours from midnight.
	for _, label := range []string{">May 5 18:00</text>", ">May 6 00:00</text>", ">06:00</text>", ">12:00</text>"} {
		require.Contains(t, day, label, "axis label")
	}
	require.NotContains(t, day, ">13:00</text>", "no tick after now, and no two ticks alike")
	require.Contains(t, svgOf(t, p, "chart-day-latency"), `<title>2031-05-06 12:30–13:00 UTC: p50 200 ms, p95 900 ms</title>`)

	// Without attempts the charts say so.
	b.setClock(now.Add(48 * time.Hour))
	p = br.get("/endpoints/" + other.endpoint.ID.String())
	require.Contains(t, svgOf(t, p, "chart-hour-counts"), "No attempts from 2031-05-08 11:35:00 UTC to 2031-05-08 12:35:00 UTC.")
	require.NotContains(t, svgOf(t, p, "chart-day-counts"), `<g class="bar">`)
	require.Contains(t, svgOf(t, p, "chart-day-latency"), `>No attempts</text>`)
}

// TestDeliveryTimeline: the delivery page draws each attempt as a mark at
// its time coloured by outcome, and the next attempt at the time it will
// really go: the endpoint's throttle or open circuit postpones it, and a
// time already past is "due now".
func TestDeliveryTimeline(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/timeline", false)
	first := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	b.attempt(s, first, 429, 40)
	b.attempt(s, first.Add(time.Minute), 503, 1200)
	b.attempt(s, first.Add(2*time.Minute), 0, 30000)
	due := time.Now().UTC().Add(5 * time.Minute).Truncate(time.Second)
	b.setNext(s.delivery.ID, "failed", due)

	br := b.browser()
	br.login(b.keyA)
	path := "/deliveries/" + s.delivery.ID.String()

	// Its own next attempt time, in the future.
	p := br.get(path)
	require.Equal(t, http.StatusOK, p.Status)
	tl := svgOf(t, p, "timeline")
	require.Contains(t, tl, `aria-labelledby="timeline-title timeline-desc"`)
	require.Contains(t, tl, "<title>#1 at "+utcText(first)+": HTTP 429 in 40 ms</title>")
	require.Contains(t, tl, "<title>#2 at "+utcText(first.Add(time.Minute))+": HTTP 503 in 1200 ms</title>")
	require.Contains(t, tl, "<title>#3 at "+utcText(first.Add(2*time.Minute))+": no response in 30000 ms</title>")
	require.Equal(t, 1, strings.Count(tl, `class="mark-throttled"`))
	require.Equal(t, 2, strings.Count(tl, `class="mark-failed"`))
	require.Contains(t, tl, "<title>next attempt at "+utcText(due)+"</title>")
	require.Contains(t, tl, "3 attempts, the last at "+utcText(first.Add(2*time.Minute))+": no response; next attempt at "+utcText(due)+".")
	require.Contains(t, p.Body, `<span id="next-attempt"><time datetime="`+due.Format(time.RFC3339)+`">`)

	// Throttled for an hour: the next attempt waits for the throttle.
	until := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	dispatchtest.SetFlow(t, b.store, s.endpoint.ID, func(f *dispatch.Flow) {
		f.Throttle = flow.Throttle{Until: until, Reason: "429 with Retry-After: 3600", Count: 1}
	})
	p = br.get(path)
	require.Contains(t, svgOf(t, p, "timeline"), "<title>next attempt at "+utcText(until)+" (throttled)</title>")
	require.Contains(t, p.Body, `<span id="next-attempt"><time datetime="`+until.Format(time.RFC3339)+`">`)
	require.Contains(t, p.Body, "(throttled)")
	require.NotContains(t, p.Body, `datetime="`+due.Format(time.RFC3339)+`"`, "the delivery's own time is not shown as next")

	// Its circuit open, the next probe in two hours: the next attempt
	// waits for the probe.
	opened := time.Now().UTC().Truncate(time.Second)
	probe := opened.Add(2 * time.Hour)
	dispatchtest.SetFlow(t, b.store, s.endpoint.ID, func(f *dispatch.Flow) {
		f.Throttle = flow.Throttle{}
		f.Breaker = flow.Breaker{State: sluice.CircuitOpen, Failures: 5, OpenedAt: &opened, NextProbeAt: &probe,
			ProbeInterval: 2 * time.Hour, LastError: "HTTP 503"}
	})
	p = br.get(path)
	require.Contains(t, svgOf(t, p, "timeline"), "<title>next attempt at "+utcText(probe)+" (circuit open: next probe)</title>")
	require.Contains(t, p.Body, `<span id="next-attempt"><time datetime="`+probe.Format(time.RFC3339)+`">`)

	// A next attempt time already past, the endpoint well again: due now,
	// no past time shown as next.
	dispatchtest.SetFlow(t, b.store, s.endpoint.ID, func(f *dispatch.Flow) {
		f.Breaker = flow.Breaker{State: sluice.CircuitClosed}
	})
	past := time.Now().UTC().Add(-3 * time.Minute).Truncate(time.Second)
	b.setNext(s.delivery.ID, "failed", past)
	p = br.get(path)
	require.Contains(t, p.Body, `<span id="next-attempt"><strong>due now</strong>`)
	require.Contains(t, svgOf(t, p, "timeline"), "<title>next attempt due now</title>")
	require.NotContains(t, p.Body, `datetime="`+past.Format(time.RFC3339)+`"`)

	// Delivered: no next attempt at all.
	b.setNext(s.delivery.ID, "delivered", time.Time{})
	p = br.get(path)
	require.NotContains(t, p.Body, `id="timeline-next"`)
	require.NotContains(t, p.Body, `id="next-attempt"`)
	require.Contains(t, svgOf(t, p, "timeline"), "3 attempts, the last at")
}

// setNext sets a delivery's status and next attempt time (none for a zero
// time).
func (b *bundle) setNext(id uuid.UUID, status string, next time.Time) {
	b.t.Helper()
	var at *time.Time
	if !next.IsZero() {
		at = &next
	}
	_, err := b.store.Pool().Exec(context.Background(),
		`UPDATE deliveries SET status = $2, next_attempt_at = $3 WHERE id = $1`, id, status, at)
	require.NoError(b.t, err)
}

// utcText is a time as the dashboard writes it.
func utcText(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// TestDeliveryTablesShowTheRealNextAttempt: the endpoint page's and the
// event page's tables say when a delivery will really go, like its own
// page: after a throttle, and "due now" rather than a past time.
func TestDeliveryTablesShowTheRealNextAttempt(t *testing.T) {
	b := setup(t)
	s := b.seed(b.tenantA, "https://hooks.acme.test/tables", false)
	past := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	b.setNext(s.delivery.ID, "failed", past)
	br := b.browser()
	br.login(b.keyA)
	pages := []string{"/endpoints/" + s.endpoint.ID.String(), "/events/" + s.delivery.EventID.String()}
	for _, path := range pages {
		p := br.get(path)
		require.Equal(t, http.StatusOK, p.Status)
		require.Contains(t, p.Body, "due now", path)
		require.NotContains(t, p.Body, `datetime="`+past.Format(time.RFC3339)+`"`, "%s: no past time as the next attempt", path)
	}
	until := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	dispatchtest.SetFlow(t, b.store, s.endpoint.ID, func(f *dispatch.Flow) {
		f.Throttle = flow.Throttle{Until: until, Reason: "429", Count: 1}
	})
	for _, path := range pages {
		p := br.get(path)
		require.Contains(t, p.Body, `datetime="`+until.Format(time.RFC3339)+`"`, path)
		require.Contains(t, p.Body, "(throttled)", path)
	}
}

// TestEffectiveRateChart: an adaptive endpoint's page charts its effective
// rate over the last hour from its slowdowns, recorded as a dispatch step
// saves them, from the endpoint's creation when that is within the hour;
// an endpoint whose rate limit is not adaptive has no such chart.
func TestEffectiveRateChart(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	s := b.seed(b.tenantA, "https://hooks.acme.test/adaptive", false)
	br := b.browser()
	br.login(b.keyA)
	path := "/endpoints/" + s.endpoint.ID.String()
	require.NotContains(t, br.get(path).Body, `id="chart-rate-svg"`, "no rate limit: no chart")

	set := s.endpoint.Settings()
	set.RateLimit = &sluice.RateLimit{PerSecond: 100, Burst: 100, Adaptive: true}
	_, err := b.store.UpdateEndpoint(ctx, b.tenantA.ID, s.endpoint.ID, set, false)
	require.NoError(t, err)
	created := func(ago time.Duration) {
		t.Helper()
		_, err := b.store.Pool().Exec(ctx, `UPDATE endpoints SET created_at = now() - $2::interval WHERE id = $1`, s.endpoint.ID, ago)
		require.NoError(t, err)
	}
	created(2 * time.Hour)
	now := time.Now().UTC()
	for _, sd := range []flow.Adaptive{{Rate: 40, At: now.Add(-20 * time.Minute)}, {Rate: 25, At: now.Add(-5 * time.Minute)}} {
		dispatchtest.SetFlow(t, b.store, s.endpoint.ID, func(f *dispatch.Flow) { f.Adaptive = flow.Adaptive{Rate: sd.Rate, At: sd.At, HalvedAt: sd.At} })
	}

	p := br.get(path)
	svg := svgOf(t, p, "chart-rate-svg")
	require.Contains(t, svg, "lowest 25/s, now 100/s, of 100/s configured")
	require.Contains(t, svg, `class="configured"`)
	line := regexp.MustCompile(`<polyline class="line-rate" points="([^"]+)"`).FindStringSubmatch(svg)
	require.NotNil(t, line)
	points := strings.Fields(line[1])
	require.GreaterOrEqual(t, len(points), 121, "a point every 30 s over the hour")
	require.LessOrEqual(t, len(points), 121+2*3, "and the drop and recovery of each slowdown")
	y := func(p string) string { _, v, _ := strings.Cut(p, ","); return v }
	require.Equal(t, "10.0", y(points[0]), "an hour ago: the configured rate (100/s of an axis to 100/s)")
	require.Equal(t, "10.0", y(points[len(points)-1]), "now: recovered")
	require.True(t, slices.ContainsFunc(points, func(p string) bool { return y(p) == "92.5" }), "the drop to 25/s")
	x := func(p string) float64 {
		v, _, _ := strings.Cut(p, ",")
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		return f
	}
	require.InDelta(t, 56.0, x(points[0]), 0.1, "the curve starts at the axis's start")

	// Created ten minutes ago: the curve starts then, five sixths along
	// the hour's axis (from x 56 to 628), not an hour ago.
	created(10 * time.Minute)
	line = regexp.MustCompile(`<polyline class="line-rate" points="([^"]+)"`).FindStringSubmatch(svgOf(t, br.get(path), "chart-rate-svg"))
	require.NotNil(t, line)
	points = strings.Fields(line[1])
	require.InDelta(t, 56+572*5.0/6, x(points[0]), 1.0, "the curve starts at the endpoint's creation")
	require.LessOrEqual(t, len(points), 21+2*3, "a point every 30 s since")
}

// TestPollEndpointPage: a poll endpoint's page shows no circuit, throttle
// or rate limit (none applies to a read) and no latency charts, but still
// charts its reads; a push endpoint's page shows them all.
func TestPollEndpointPage(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	push := b.seed(b.tenantA, "https://hooks.acme.test/push", false)
	poll, err := b.store.CreateEndpoint(ctx, b.tenantA.ID, sluice.EndpointSettings{Description: "warehouse reader",
		MaxInFlight: 10, Delivery: sluice.DeliveryPoll}, storetest.Secret)
	require.NoError(t, err)
	br := b.browser()
	br.login(b.keyA)

	p := br.get("/endpoints/" + push.endpoint.ID.String())
	requireContains(t, p, "<dt>Circuit</dt>", "<dt>Throttle</dt>", "<dt>Rate limit</dt>", `id="chart-hour-latency"`, "p95 latency")
	p = br.get("/endpoints/" + poll.ID.String())
	require.Equal(t, http.StatusOK, p.Status)
	requireContains(t, p, `id="poll-state"`, `id="chart-hour-counts"`, `id="chart-day-counts"`)
	for _, absent := range []string{"<dt>Circuit</dt>", "<dt>Throttle</dt>", "<dt>Rate limit</dt>", `id="chart-hour-latency"`, `id="chart-day-latency"`, "p95 latency", `id="chart-rate"`} {
		require.NotContains(t, p.Body, absent)
	}
}

// TestEndpointNamedWithDescription: two endpoints with the same URL are
// told apart by their descriptions wherever a page names one: a
// delivery's page, an event's fan-out, the dead letters' filter, the
// "Replay all" confirmation.
func TestEndpointNamedWithDescription(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	const u = "https://hooks.acme.test/same"
	s := b.seed(b.tenantA, u, true) // description "orders"
	twin, err := b.store.CreateEndpoint(ctx, b.tenantA.ID, sluice.EndpointSettings{URL: u, Description: "refunds", MaxInFlight: 10}, storetest.Secret)
	require.NoError(t, err)
	require.NoError(t, b.store.SetSubscriptions(ctx, b.tenantA.ID, twin.ID, []string{"*"}, nil))
	ev := b.event(b.tenantA, "order.created", `{}`)
	b.kill(twin.ID, 500, "boom", "down")
	br := b.browser()
	br.login(b.keyA)

	named := func(id uuid.UUID, desc string) string {
		return `<a class="url" href="/endpoints/` + id.String() + `"><span class="seg">https://</span><wbr><span class="seg">hooks.acme.test/</span><wbr><span class="seg">same</span></a> <span class="endpoint-description">` + desc + `</span>`
	}
	p := br.get("/deliveries/" + s.delivery.ID.String())
	require.Contains(t, p.Body, named(s.endpoint.ID, "orders"))
	p = br.get("/events/" + ev.ID.String())
	require.Contains(t, p.Body, named(s.endpoint.ID, "orders"))
	require.Contains(t, p.Body, named(twin.ID, "refunds"))
	p = br.get("/dead")
	requireContains(t, p, u+" — orders</option>", u+" — refunds</option>")
	p = br.get("/endpoints/" + twin.ID.String() + "/replay?status=dead&from=dead")
	require.Contains(t, p.Body, named(twin.ID, "refunds"))
}
