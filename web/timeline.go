package web

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// NextAttempt is when a queued delivery will really be attempted: its own
// next attempt time, or later while its endpoint is throttled or its
// circuit open; never a time in the past.
type NextAttempt struct {
	At time.Time
	// DueNow says At is not in the future: a worker sends it as soon as it
	// gets to it.
	DueNow bool
	// Reason says why At is later than the delivery's own next attempt
	// time ("throttled", "circuit open"); "" when it is not.
	Reason string
	// Paused says its endpoint is disabled: nothing is sent until it is
	// enabled again.
	Paused bool
}

// The timeline's frame, in viewBox units.
const (
	timelineWidth  = 1200
	timelineHeight = 64
	timelineLeft   = 14
	timelineRight  = 1186
	timelineAxisY  = 28
)

// timelineMark is an attempt, or the next one, on the delivery timeline.
type timelineMark struct {
	X     float64
	Class string
	Title string
}

// timelinePlot is a delivery's attempts on a time axis from its creation
// to its next attempt (or its last).
type timelinePlot struct {
	Marks  []timelineMark
	Next   *timelineMark
	XTicks []tick
}

// plotTimeline lays out the attempts of a delivery created at created, and
// its next attempt if it has one.
func plotTimeline(created time.Time, attempts []sluice.Attempt, next *NextAttempt) timelinePlot {
	start, end := created, created
	for _, a := range attempts {
		start, end = minTime(start, a.At), maxTime(end, a.At)
	}
	if next != nil {
		end = maxTime(end, next.At)
	}
	if end.Sub(start) < time.Second {
		end = start.Add(time.Second)
	}
	x := func(t time.Time) float64 {
		return timelineLeft + float64(t.Sub(start))/float64(end.Sub(start))*(timelineRight-timelineLeft)
	}
	p := timelinePlot{XTicks: []tick{
		{Pos: timelineLeft, Label: utc(start), Anchor: "start"},
		{Pos: timelineRight, Label: utc(end), Anchor: "end"},
	}}
	for i, a := range attempts {
		p.Marks = append(p.Marks, timelineMark{X: x(a.At), Class: markClass(a),
			Title: fmt.Sprintf("#%d at %s: %s in %s", i+1, utc(a.At), outcomeWords(a), latency(a.LatencyMS))})
	}
	if next != nil {
		p.Next = &timelineMark{X: x(next.At), Class: "mark-next", Title: nextWords(*next)}
	}
	return p
}

// markClass colours an attempt's mark by its outcome.
func markClass(a sluice.Attempt) string {
	if a.StatusCode == nil {
		return "mark-failed"
	}
	switch c := *a.StatusCode; {
	case c >= 200 && c < 300:
		return "mark-delivered"
	case c == 429:
		return "mark-throttled"
	default:
		return "mark-failed"
	}
}

// outcomeWords is an attempt's outcome in words.
func outcomeWords(a sluice.Attempt) string {
	if a.StatusCode == nil {
		return "no response"
	}
	return fmt.Sprintf("HTTP %d", *a.StatusCode)
}

// nextWords is the next attempt in words.
func nextWords(n NextAttempt) string {
	s := "next attempt "
	switch {
	case n.DueNow:
		s += "due now"
	default:
		s += "at " + utc(n.At)
	}
	if n.Reason != "" {
		s += " (" + n.Reason + ")"
	}
	if n.Paused {
		s += ", once the endpoint is enabled"
	}
	return s
}

// timelineSummary is the timeline's accessible description.
func timelineSummary(attempts []sluice.Attempt, next *NextAttempt) string {
	s := plural(int64(len(attempts)), "attempt", "attempts")
	if len(attempts) > 0 {
		s += ", the last at " + utc(attempts[len(attempts)-1].At) + ": " + outcomeWords(attempts[len(attempts)-1])
	}
	if next != nil {
		s += "; " + nextWords(*next)
	}
	return s + "."
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// nextAnchor keeps the "next" label inside the timeline at its ends.
func nextAnchor(x float64) string {
	switch {
	case x > timelineRight-20:
		return "end"
	case x < timelineLeft+20:
		return "start"
	default:
		return "middle"
	}
}
