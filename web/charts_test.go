package web

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 1: 1, 1.5: 2, 3: 5, 5: 5, 7: 10, 10: 10, 11: 20, 290: 500, 1000: 1000, 1001: 2000} {
		require.Equal(t, want, niceCeil(v), "niceCeil(%v)", v)
	}
}

// chartOf is a chart of n one-minute buckets from 12:00, with some set.
func chartOf(n int, set map[int]sluice.AttemptBucket) AttemptChart {
	since := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	c := AttemptChart{ID: "t", Name: "Test", Per: "minute", Bucket: time.Minute, TickEvery: 2, Buckets: make([]sluice.AttemptBucket, n),
		Now: since.Add(time.Duration(n) * time.Minute)}
	for i := range c.Buckets {
		c.Buckets[i] = set[i]
		c.Buckets[i].Start = since.Add(time.Duration(i) * time.Minute)
	}
	return c
}

func TestPlotCounts(t *testing.T) {
	c := chartOf(4, map[int]sluice.AttemptBucket{
		1: {Delivered: 2, Throttled: 1, Failed: 1}, // 4: the top of the axis is 5
		3: {Failed: 5},
	})
	p := plotCounts(c)
	plotH := float64(plotBottom - plotTop)
	w := float64(plotRight-plotLeft) / 4

	require.Len(t, p.Bars, 2, "no bar for empty buckets")
	b := p.Bars[0]
	require.Equal(t, "2031-01-01 12:01–12:02 UTC: 2 delivered, 1 failed, 1 throttled", b.Title)
	require.Len(t, b.Rects, 3)
	// Stacked from the bottom: delivered, throttled, failed.
	require.Equal(t, []string{"bar-delivered", "bar-throttled", "bar-failed"}, []string{b.Rects[0].Class, b.Rects[1].Class, b.Rects[2].Class})
	require.InDelta(t, plotBottom, b.Rects[0].Y+b.Rects[0].H, 1e-9)
	require.InDelta(t, plotH*2/5, b.Rects[0].H, 1e-9)
	require.InDelta(t, b.Rects[0].Y, b.Rects[1].Y+b.Rects[1].H, 1e-9)
	require.InDelta(t, plotH/5, b.Rects[2].H, 1e-9)
	require.InDelta(t, plotLeft+w+0.15*w, b.Rects[0].X, 1e-9)
	require.InDelta(t, 0.7*w, b.Rects[0].W, 1e-9)
	// The full bucket reaches the top.
	require.InDelta(t, plotTop, p.Bars[1].Rects[0].Y, 1e-9)

	require.Equal(t, []tick{
		{Pos: plotLeft, Label: "12:00", Anchor: "start"},
		{Pos: plotLeft + 2*w, Label: "12:02", Anchor: "middle"},
		{Pos: plotRight, Label: "12:04", Anchor: "end"},
	}, p.XTicks)
	require.Equal(t, []tick{{Pos: plotBottom, Label: "0"}, {Pos: plotTop, Label: "5"}}, p.YTicks, "no 2.5 on a count axis")
	require.Equal(t, []tick{{Pos: plotBottom, Label: "0 ms"}, {Pos: plotBottom - plotH/2, Label: "100 ms"}, {Pos: plotTop, Label: "200 ms"}},
		valueTicks(200, " ms"))
}

func TestPlotLatency(t *testing.T) {
	c := chartOf(5, map[int]sluice.AttemptBucket{
		0: {Delivered: 1, P50MS: 100, P95MS: 100},
		1: {Delivered: 2, P50MS: 150, P95MS: 200},
		3: {Failed: 1, P50MS: 50, P95MS: 50},
	})
	p := plotLatency(c)
	require.Len(t, p.Points, 3)
	require.Len(t, p.P50, 2, "the line breaks at a bucket without attempts")
	w := float64(plotRight-plotLeft) / 5
	require.InDelta(t, plotLeft+w/2, p.Points[0].X, 1e-9)
	require.InDelta(t, valueY(200, 200), p.Points[1].Y95, 1e-9)
	require.InDelta(t, plotTop, p.Points[1].Y95, 1e-9, "the highest p95 (200) tops the axis")
	require.Equal(t, coord(p.Points[0].X)+","+coord(p.Points[0].Y50)+" "+coord(p.Points[1].X)+","+coord(p.Points[1].Y50), p.P50[0])
	require.Equal(t, "2031-01-01 12:03–12:04 UTC: p50 50 ms, p95 50 ms", p.Points[2].Title)
}

func TestPlotTimeline(t *testing.T) {
	created := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	ok, busy := 200, 429
	attempts := []sluice.Attempt{
		{At: created.Add(time.Minute), StatusCode: &busy, LatencyMS: 5},
		{At: created.Add(2 * time.Minute), LatencyMS: 30000},
		{At: created.Add(3 * time.Minute), StatusCode: &ok, LatencyMS: 7},
	}
	next := &NextAttempt{At: created.Add(4 * time.Minute), Reason: "throttled"}
	p := plotTimeline(created, attempts, next)
	span := float64(timelineRight - timelineLeft)
	require.Len(t, p.Marks, 3)
	require.InDelta(t, timelineLeft+span/4, p.Marks[0].X, 1e-9)
	require.InDelta(t, timelineLeft+span*3/4, p.Marks[2].X, 1e-9)
	require.Equal(t, []string{"mark-throttled", "mark-failed", "mark-delivered"}, []string{p.Marks[0].Class, p.Marks[1].Class, p.Marks[2].Class})
	require.Equal(t, "#2 at 2031-01-01 12:02:00 UTC: no response in 30000 ms", p.Marks[1].Title)
	require.NotNil(t, p.Next)
	require.InDelta(t, timelineRight, p.Next.X, 1e-9, "the next attempt ends the axis")
	require.Equal(t, "next attempt at 2031-01-01 12:04:00 UTC (throttled)", p.Next.Title)
	require.Equal(t, "2031-01-01 12:04:00 UTC", p.XTicks[1].Label)

	// Nothing yet: one point in time still makes an axis.
	p = plotTimeline(created, nil, &NextAttempt{At: created, DueNow: true})
	require.Empty(t, p.Marks)
	require.InDelta(t, timelineLeft, p.Next.X, 1e-9)
	require.Equal(t, "next attempt due now", p.Next.Title)
}

// TestTimeTicks: the day chart drawn at 17:10 runs from 17:30 the day
// before to 17:30 (its last bucket holds now): its ticks fall on round
// times (every six hours from midnight), are never after now, never read
// the same, and carry the date on the first and at the change of day; a
// range within one day has times alone.
func TestTimeTicks(t *testing.T) {
	now := time.Date(2026, 11, 27, 17, 10, 42, 0, time.UTC)
	day := AttemptChart{Bucket: 30 * time.Minute, TickEvery: 12, Now: now, Buckets: make([]sluice.AttemptBucket, 48)}
	since := time.Date(2026, 11, 26, 17, 30, 0, 0, time.UTC)
	for i := range day.Buckets {
		day.Buckets[i].Start = since.Add(time.Duration(i) * day.Bucket)
	}
	w := float64(plotRight-plotLeft) / 48 // a bucket
	want := []tick{
		{Pos: plotLeft + w, Label: "Nov 26 18:00", Anchor: "start"},
		{Pos: plotLeft + 13*w, Label: "Nov 27 00:00", Anchor: "middle"},
		{Pos: plotLeft + 25*w, Label: "06:00", Anchor: "middle"},
		{Pos: plotLeft + 37*w, Label: "12:00", Anchor: "middle"},
	}
	got := timeTicks(day)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Label, got[i].Label)
		require.Equal(t, want[i].Anchor, got[i].Anchor, want[i].Label)
		require.InDelta(t, want[i].Pos, got[i].Pos, 1e-9, want[i].Label)
	}

	// The hour from 12:00, drawn at 12:59:30: no tick at 13:00.
	hour := chartOf(60, nil)
	hour.TickEvery = 15
	hour.Now = time.Date(2031, 1, 1, 12, 59, 30, 0, time.UTC)
	var labels []string
	for _, tk := range timeTicks(hour) {
		labels = append(labels, tk.Label)
	}
	require.Equal(t, []string{"12:00", "12:15", "12:30", "12:45"}, labels)

	// The hour from 03:59 (drawn at 04:58:10) is labelled at quarter
	// hours, not at 03:59, 04:14 …
	odd := chartOf(60, nil)
	for i := range odd.Buckets {
		odd.Buckets[i].Start = time.Date(2031, 1, 1, 3, 59+i, 0, 0, time.UTC)
	}
	odd.TickEvery, odd.Now = 15, time.Date(2031, 1, 1, 4, 58, 10, 0, time.UTC)
	oddTicks := timeTicks(odd)
	labels = labels[:0]
	for _, tk := range oddTicks {
		labels = append(labels, tk.Label)
	}
	require.Equal(t, []string{"04:00", "04:15", "04:30", "04:45"}, labels)
	bucket := float64(plotRight-plotLeft) / 60
	require.InDelta(t, plotLeft+bucket, oddTicks[0].Pos, 1e-9, "04:00 is the start of the second bucket")
	require.Equal(t, "start", oddTicks[0].Anchor)
	require.InDelta(t, plotLeft+46*bucket, oddTicks[3].Pos, 1e-9)

	// Drawn at the very end of its range, the end is a tick.
	hour.Now = time.Date(2031, 1, 1, 13, 0, 0, 0, time.UTC)
	ticks := timeTicks(hour)
	end := ticks[len(ticks)-1]
	require.Equal(t, "13:00", end.Label)
	require.Equal(t, "end", end.Anchor)
	require.InDelta(t, plotRight, end.Pos, 1e-9)

	// An hour across midnight.
	at := func(h, m int) time.Time { return time.Date(2026, 11, 26, h, m, 0, 0, time.UTC) }
	require.Equal(t, []string{"Nov 26 23:30", "23:45", "Nov 27 00:00", "00:15"},
		tickLabels([]time.Time{at(23, 30), at(23, 45), at(24, 0), at(24, 15)}, at(23, 20), at(24, 20)))
	// Ending at midnight is within the day.
	require.Equal(t, []string{"23:00", "23:30"}, tickLabels([]time.Time{at(23, 0), at(23, 30)}, at(23, 0), at(24, 0)))
}

// TestStatusWords: badges say a status in words; an endpoint disabled by
// Sluice says why; unknown values still read as words.
func TestStatusWords(t *testing.T) {
	for raw, want := range map[string]string{
		sluice.EndpointCircuitOpen: "Circuit open", sluice.EndpointThrottled: "Throttled", sluice.EndpointActive: "Active",
		sluice.CircuitHalfOpen: "Half-open", sluice.DeliveryFailed: "Failed, will retry", sluice.DeliveryDead: "Dead",
		"deprecated": "Deprecated", "some_new_state": "Some new state",
	} {
		require.Equal(t, want, statusLabel(raw), raw)
	}
	gone, failing, manual := sluice.DisabledGone, sluice.DisabledFailing, sluice.DisabledManual
	for reason, want := range map[*string]string{&gone: "Disabled — gone", &failing: "Disabled — failing", &manual: "Disabled — by hand", nil: "Disabled"} {
		require.Equal(t, want, endpointStatusLabel(sluice.Endpoint{Status: sluice.EndpointDisabled, DisabledReason: reason}))
	}
	var buf strings.Builder
	require.NoError(t, badge(sluice.EndpointCircuitOpen).Render(context.Background(), &buf))
	require.Equal(t, `<span class="badge badge-circuit_open" title="circuit_open">Circuit open</span>`, buf.String(), "the class keeps the raw value")
}

// TestAttemptError: an error that only repeats the status code is not
// shown beside it; a list's detail falls back to the response body, cut
// to maxErrorText characters.
func TestAttemptError(t *testing.T) {
	code, other := 422, "status 500"
	same := "status 422"
	require.Empty(t, attemptError(sluice.Attempt{StatusCode: &code, Error: &same}))
	require.Equal(t, "status 500", attemptError(sluice.Attempt{StatusCode: &code, Error: &other}))
	timeout := "timeout after 10s"
	require.Equal(t, timeout, attemptDetail(sluice.Attempt{Error: &timeout}))
	body := "  {\"error\":\n  \"" + strings.Repeat("x", 200) + "\"}"
	d := attemptDetail(sluice.Attempt{StatusCode: &code, Error: &same, ResponseBody: &body})
	require.True(t, strings.HasPrefix(d, `{"error": "xxx`), d)
	cut := truncate(d, maxErrorText)
	require.Equal(t, maxErrorText, utf8.RuneCountInString(cut))
	require.True(t, strings.HasSuffix(cut, "…"))
	require.Equal(t, "short", truncate("short", maxErrorText))
}
