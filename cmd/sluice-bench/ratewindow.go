package main

import (
	"slices"
	"time"
)

// rateCheck is what one rate-limited endpoint's arrival times show.
type rateCheck struct {
	// MaxWindow is the most requests in any one-second window [t, t+1s),
	// over every arrival as the window's start.
	MaxWindow int
	// WindowAt is the start of (the first) such window.
	WindowAt time.Time
	// Steady is the steady part: from one second after the first arrival
	// (the burst spent) to the arrival after which only one second's worth
	// (rate) of requests were left (the backlog nearly empty).
	SteadyFrom, SteadyTo time.Time
	// SteadyCount is the number of arrivals in [SteadyFrom, SteadyTo).
	SteadyCount int
	// SteadyMaxWindow is MaxWindow over the windows that lie within the
	// steady part: with an exact bucket about rate, where a bucket that
	// gained tokens (e.g. when a job moved to another process) would show
	// as more, even while burst + rate still holds.
	SteadyMaxWindow int
}

// checkRate computes a rateCheck from the arrival times of every request
// an endpoint with the given rate (per second) received, which it sorts in
// place. The steady part is empty when the arrivals span too little.
func checkRate(at []time.Time, rate int) rateCheck {
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var c rateCheck
	j := 0
	for i := range at {
		end := at[i].Add(time.Second)
		for j < len(at) && at[j].Before(end) {
			j++
		}
		if n := j - i; n > c.MaxWindow {
			c.MaxWindow, c.WindowAt = n, at[i]
		}
	}
	if len(at) <= rate {
		return c
	}
	c.SteadyFrom, c.SteadyTo = at[0].Add(time.Second), at[len(at)-1-rate]
	j = 0
	for i, t := range at {
		if !t.Before(c.SteadyFrom) && t.Before(c.SteadyTo) {
			c.SteadyCount++
		}
		end := t.Add(time.Second)
		for j < len(at) && at[j].Before(end) {
			j++
		}
		if !t.Before(c.SteadyFrom) && !end.After(c.SteadyTo) {
			c.SteadyMaxWindow = max(c.SteadyMaxWindow, j-i)
		}
	}
	return c
}

// Achieved is the steady part's rate in requests per second; 0 when the
// steady part is shorter than minSteady.
func (c rateCheck) Achieved(minSteady time.Duration) float64 {
	d := c.SteadyTo.Sub(c.SteadyFrom)
	if d < minSteady || d <= 0 {
		return 0
	}
	return float64(c.SteadyCount) / d.Seconds()
}
