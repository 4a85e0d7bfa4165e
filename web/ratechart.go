package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/flow"
)

// RateChart is an adaptive endpoint's effective rate on an axis from
// Since to Until: the points of its curve (flow.RateCurve), which start
// later than Since for an endpoint created since, and the configured rate
// it grows back to, in deliveries a second.
type RateChart struct {
	Since, Until time.Time
	Configured   float64
	Points       []flow.RatePoint
}

// ratePlot is a RateChart laid out in the chart frame.
type ratePlot struct {
	Line       string  // the curve's polyline points
	Configured float64 // y of the configured rate
	XTicks     []tick
	YTicks     []tick
}

// rateX is the x of t on the chart's time axis.
func (c RateChart) rateX(t time.Time) float64 {
	span := c.Until.Sub(c.Since).Seconds()
	return plotLeft + t.Sub(c.Since).Seconds()/span*(plotRight-plotLeft)
}

// plotRate lays out c: the curve, the configured rate, a tick on each
// quarter hour within the range, and the rate axis from 0 to a round
// number above the configured rate.
func plotRate(c RateChart) ratePlot {
	top := niceCeil(c.Configured)
	p := ratePlot{Configured: valueY(c.Configured, top), YTicks: valueTicks(top, "/s")}
	pts := make([]string, 0, len(c.Points))
	for _, pt := range c.Points {
		pts = append(pts, coord(c.rateX(pt.At))+","+coord(valueY(pt.Rate, top)))
	}
	p.Line = strings.Join(pts, " ")
	var at []time.Time
	for t := c.Since.Truncate(15 * time.Minute); !t.After(c.Until); t = t.Add(15 * time.Minute) {
		if !t.Before(c.Since) {
			at = append(at, t)
		}
	}
	labels := tickLabels(at, c.Since, c.Until)
	for i, t := range at {
		tk := tick{Pos: c.rateX(t), Label: labels[i], Anchor: "middle"}
		switch {
		case t.Sub(c.Since) < 5*time.Minute:
			tk.Anchor = "start"
		case c.Until.Sub(t) < 5*time.Minute:
			tk.Anchor = "end"
		}
		p.XTicks = append(p.XTicks, tk)
	}
	return p
}

// rateCurveSummary describes the curve in words: its lowest and its last rate.
func rateCurveSummary(c RateChart) string {
	if len(c.Points) == 0 {
		return "No effective rate to show."
	}
	low := c.Points[0].Rate
	for _, p := range c.Points {
		low = min(low, p.Rate)
	}
	return fmt.Sprintf("Effective rate over the last hour (UTC): lowest %s/s, now %s/s, of %s/s configured.",
		perSecond(low), perSecond(c.Points[len(c.Points)-1].Rate), perSecond(c.Configured))
}
