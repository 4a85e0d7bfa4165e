package web

import (
	"testing"
	"time"

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
	c := AttemptChart{ID: "t", Name: "Test", Per: "minute", Bucket: time.Minute, TickEvery: 2, Buckets: make([]sluice.AttemptBucket, n)}
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
