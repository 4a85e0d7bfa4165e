package web

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Chart geometry. The charts are inline SVG written by templ
// (charts.templ); every coordinate is computed here, in the units of the
// charts' viewBox, by small pure functions.

// The frame of a chart, in viewBox units: the plot area and the room left
// around it for the axes' labels.
const (
	chartWidth  = 640
	chartHeight = 150
	plotLeft    = 56
	plotRight   = 628
	plotTop     = 10
	plotBottom  = 120
)

// AttemptChart is an endpoint's attempts over one time range: the
// deliveries, failures and throttled attempts per bucket, and the latency
// percentiles per bucket.
type AttemptChart struct {
	// ID tells the range's charts apart on a page ("hour", "day").
	ID string
	// Name is the range in words ("Last hour"), Per the bucket ("minute").
	Name, Per string
	// Bucket is the length of a bucket; Buckets are every bucket of the
	// range, oldest first, those without attempts included.
	Bucket  time.Duration
	Buckets []sluice.AttemptBucket
	// TickEvery is how many buckets apart the time axis is labelled.
	TickEvery int
	// Now is when the chart is drawn: the time axis has no tick after it.
	Now time.Time
}

// Since is when the range starts, Until when it ends.
func (c AttemptChart) Since() time.Time { return c.Buckets[0].Start }

// Until is when the range ends.
func (c AttemptChart) Until() time.Time { return c.Buckets[len(c.Buckets)-1].Start.Add(c.Bucket) }

// Totals sums the range's counts (its percentiles are left 0).
func (c AttemptChart) Totals() sluice.AttemptBucket {
	var t sluice.AttemptBucket
	for _, b := range c.Buckets {
		t.Delivered += b.Delivered
		t.Failed += b.Failed
		t.Throttled += b.Throttled
	}
	return t
}

// tick is a label on an axis: at x on the time axis, at y on the value
// axis.
type tick struct {
	Pos    float64
	Label  string
	Anchor string // text-anchor of a time label: start, middle or end
}

// rect is one rectangle of a bar, of a class (bar-delivered, bar-failed,
// bar-throttled).
type rect struct {
	X, Y, W, H float64
	Class      string
}

// bar is the stacked bar of one bucket with attempts, and its numbers in
// words.
type bar struct {
	Title string
	Rects []rect
}

// countsPlot is the bar chart of a range's attempts by outcome.
type countsPlot struct {
	Bars   []bar
	XTicks []tick
	YTicks []tick
}

// latencyPoint is one bucket's percentiles on the latency chart.
type latencyPoint struct {
	X, Y50, Y95 float64
	Title       string
}

// latencyPlot is the line chart of a range's latency percentiles: one
// polyline per run of consecutive buckets with attempts.
type latencyPlot struct {
	P50, P95 []string // polyline points
	Points   []latencyPoint
	XTicks   []tick
	YTicks   []tick
}

// niceCeil is the smallest of 1, 2, 5 times a power of ten that is at
// least v (and at least 1): the top of a value axis.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// slotX is the left edge of bucket i of n, and the width of a bucket.
func slotX(i, n int) (x, w float64) {
	w = float64(plotRight-plotLeft) / float64(n)
	return plotLeft + float64(i)*w, w
}

// valueY is the height of value v on an axis from 0 to top.
func valueY(v, top float64) float64 {
	return plotBottom - v/top*(plotBottom-plotTop)
}

// timeTicks labels the time axis at the round times TickEvery buckets
// apart (every 15 minutes: :00, :15, :30, :45; every 6 hours: 00:00,
// 06:00 …) within the range, up to c.Now: the range's last bucket holds
// now, so its end is in the future and gets no tick.
func timeTicks(c AttemptChart) []tick {
	step := time.Duration(max(c.TickEvery, 1)) * c.Bucket
	since, until := c.Since(), c.Until()
	var at []time.Time
	for t := since.Truncate(step); !t.After(until) && !t.After(c.Now); t = t.Add(step) {
		if !t.Before(since) {
			at = append(at, t)
		}
	}
	labels := tickLabels(at, since, until)
	span := until.Sub(since).Seconds()
	out := make([]tick, len(at))
	for k, t := range at {
		x := plotLeft + t.Sub(since).Seconds()/span*(plotRight-plotLeft)
		out[k] = tick{Pos: x, Label: labels[k], Anchor: edgeAnchor(x)}
	}
	return out
}

// edgeAnchor is the text-anchor of a time label at x: one near an end of
// the axis is drawn inward, so it stays within the chart.
func edgeAnchor(x float64) string {
	const room = 35 // half the width of a dated label, in viewBox units
	switch {
	case x-plotLeft < room:
		return "start"
	case plotRight-x < room:
		return "end"
	}
	return "middle"
}

// tickLabels are the labels of ticks at times on an axis from since to
// until, in UTC: "15:04", and "Jan 2 15:04" on the first tick and on the
// first of each new day when the axis crosses midnight, so no two ticks
// of a range shorter than a day or so read the same.
func tickLabels(times []time.Time, since, until time.Time) []string {
	crosses := !sameDay(since, until.Add(-time.Nanosecond))
	out := make([]string, len(times))
	for i, t := range times {
		dated := crosses && (i == 0 || !sameDay(times[i-1], t))
		if dated {
			out[i] = t.UTC().Format("Jan 2 15:04")
		} else {
			out[i] = t.UTC().Format("15:04")
		}
	}
	return out
}

// sameDay reports whether a and b are on the same UTC day.
func sameDay(a, b time.Time) bool {
	ay, am, ad := a.UTC().Date()
	by, bm, bd := b.UTC().Date()
	return ay == by && am == bm && ad == bd
}

// valueTicks labels a value axis from 0 to top at 0, top and half of it
// when that is a whole number.
func valueTicks(top float64, unit string) []tick {
	values := []float64{0, top / 2, top}
	if top/2 != math.Floor(top/2) {
		values = []float64{0, top}
	}
	out := make([]tick, 0, len(values))
	for _, v := range values {
		out = append(out, tick{Pos: valueY(v, top), Label: strconv.FormatFloat(v, 'f', -1, 64) + unit})
	}
	return out
}

// plotCounts lays out the stacked bars of c: delivered at the bottom, then
// throttled, then failed.
func plotCounts(c AttemptChart) countsPlot {
	var most int64
	for _, b := range c.Buckets {
		most = max(most, b.Attempts())
	}
	top := niceCeil(float64(most))
	p := countsPlot{XTicks: timeTicks(c), YTicks: valueTicks(top, "")}
	for i, b := range c.Buckets {
		if b.Attempts() == 0 {
			continue
		}
		x, w := slotX(i, len(c.Buckets))
		gap := w * 0.15
		br := bar{Title: bucketTitle(c, b) + ": " + countWords(b)}
		base := 0.0
		for _, part := range []struct {
			n     int64
			class string
		}{{b.Delivered, "bar-delivered"}, {b.Throttled, "bar-throttled"}, {b.Failed, "bar-failed"}} {
			if part.n == 0 {
				continue
			}
			y0, y1 := valueY(base, top), valueY(base+float64(part.n), top)
			br.Rects = append(br.Rects, rect{X: x + gap, Y: y1, W: w - 2*gap, H: y0 - y1, Class: part.class})
			base += float64(part.n)
		}
		p.Bars = append(p.Bars, br)
	}
	return p
}

// plotLatency lays out the p50 and p95 lines of c through the middle of
// each bucket with attempts.
func plotLatency(c AttemptChart) latencyPlot {
	most := 0.0
	for _, b := range c.Buckets {
		most = max(most, b.P95MS, b.P50MS)
	}
	top := niceCeil(max(most, 10))
	p := latencyPlot{XTicks: timeTicks(c), YTicks: valueTicks(top, " ms")}
	var run50, run95 []string
	flush := func() {
		if len(run50) > 0 {
			p.P50 = append(p.P50, strings.Join(run50, " "))
			p.P95 = append(p.P95, strings.Join(run95, " "))
		}
		run50, run95 = nil, nil
	}
	for i, b := range c.Buckets {
		if b.Attempts() == 0 {
			flush()
			continue
		}
		x, w := slotX(i, len(c.Buckets))
		pt := latencyPoint{X: x + w/2, Y50: valueY(b.P50MS, top), Y95: valueY(b.P95MS, top),
			Title: bucketTitle(c, b) + ": " + latencyWords(b)}
		p.Points = append(p.Points, pt)
		run50 = append(run50, coord(pt.X)+","+coord(pt.Y50))
		run95 = append(run95, coord(pt.X)+","+coord(pt.Y95))
	}
	flush()
	return p
}

// bucketTitle names a bucket by its start, in UTC.
func bucketTitle(c AttemptChart, b sluice.AttemptBucket) string {
	return b.Start.UTC().Format("2006-01-02 15:04") + "–" + b.Start.Add(c.Bucket).UTC().Format("15:04") + " UTC"
}

// countWords is a bucket's counts in words.
func countWords(b sluice.AttemptBucket) string {
	return fmt.Sprintf("%d delivered, %d failed, %d throttled", b.Delivered, b.Failed, b.Throttled)
}

// latencyWords is a bucket's percentiles in words.
func latencyWords(b sluice.AttemptBucket) string {
	return fmt.Sprintf("p50 %s, p95 %s", ms(b.P50MS), ms(b.P95MS))
}

func ms(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + " ms" }

// countsTitle and countsSummary are the accessible name and description of
// a counts chart.
func countsTitle(c AttemptChart) string {
	return "Attempts per " + c.Per + ", " + strings.ToLower(c.Name) + ", by outcome"
}

func countsSummary(c AttemptChart) string {
	t := c.Totals()
	span := utc(c.Since()) + " to " + utc(c.Until())
	if t.Attempts() == 0 {
		return "No attempts from " + span + "."
	}
	return fmt.Sprintf("%s from %s: %s.", plural(t.Attempts(), "attempt", "attempts"), span, countWords(t))
}

// latencyTitle and latencySummary are the accessible name and description
// of a latency chart.
func latencyTitle(c AttemptChart) string {
	return "Attempt latency per " + c.Per + ", " + strings.ToLower(c.Name) + ": p50 and p95"
}

func latencySummary(c AttemptChart) string {
	lo50, hi50, lo95, hi95, n := math.Inf(1), 0.0, math.Inf(1), 0.0, 0
	for _, b := range c.Buckets {
		if b.Attempts() == 0 {
			continue
		}
		n++
		lo50, hi50 = min(lo50, b.P50MS), max(hi50, b.P50MS)
		lo95, hi95 = min(lo95, b.P95MS), max(hi95, b.P95MS)
	}
	if n == 0 {
		return "No attempts from " + utc(c.Since()) + " to " + utc(c.Until()) + "."
	}
	return fmt.Sprintf("Per %s with attempts (%d): p50 from %s to %s, p95 from %s to %s.",
		c.Per, n, ms(lo50), ms(hi50), ms(lo95), ms(hi95))
}

// coord writes a coordinate for an SVG attribute.
func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
