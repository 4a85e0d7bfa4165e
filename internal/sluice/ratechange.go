package sluice

import "time"

// RateChange is one slowdown of an adaptive endpoint: its effective rate,
// in deliveries a second, dropped to Rate at At (package flow draws the
// rate between them).
type RateChange struct {
	Rate float64
	At   time.Time
}
