// The circuit breaker: per-endpoint pure state
// transitions over a Breaker value that the store keeps on the endpoint row.
// Threshold consecutive failures (429s are not failures) open it: nothing is
// attempted, deliveries keep queueing. After a probe interval one delivery
// is tried (half-open): success closes it, failure opens it again with the
// interval doubled, up to MaxProbe.

package flow

import (
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// CircuitConfig is the breaker's policy.
type CircuitConfig struct {
	Threshold  int           // consecutive failures that open the circuit
	FirstProbe time.Duration // first probe interval
	MaxProbe   time.Duration // the interval doubles up to this (DefaultMaxProbe, set by dispatch.Config.Resolve)
}

// DefaultMaxProbe is CircuitConfig.MaxProbe's default.
const DefaultMaxProbe = time.Hour

// Breaker is one endpoint's circuit.
type Breaker struct {
	State         string // sluice.CircuitClosed, CircuitOpen or CircuitHalfOpen
	Failures      int
	OpenedAt      *time.Time
	NextProbeAt   *time.Time
	ProbeInterval time.Duration
	LastError     string
}

// Transition is a change the tenant is told about.
type Transition int

// Transitions.
const (
	NoTransition Transition = iota
	CircuitOpened
	CircuitClosed
)

// Allow says how many requests may go now: -1 for no limit, 0 for none (the
// circuit is open until NextProbeAt), 1 for a probe. A probe moves the
// breaker to half-open.
func (b Breaker) Allow(now time.Time) (Breaker, int) {
	switch b.State {
	case sluice.CircuitOpen:
		if b.NextProbeAt != nil && now.Before(*b.NextProbeAt) {
			return b, 0
		}
		b.State = sluice.CircuitHalfOpen
		return b, 1
	case sluice.CircuitHalfOpen:
		return b, 1 // a probe whose result was never recorded (a crash): probe again
	default:
		return b, -1
	}
}

// Record applies one attempt's result.
func (b Breaker) Record(success bool, errMsg string, now time.Time, cfg CircuitConfig) (Breaker, Transition) {
	if success {
		wasOpen := b.State != sluice.CircuitClosed && b.State != ""
		b = Breaker{State: sluice.CircuitClosed}
		if wasOpen {
			return b, CircuitClosed
		}
		return b, NoTransition
	}
	b.Failures++
	b.LastError = errMsg
	switch b.State {
	case sluice.CircuitHalfOpen: // the probe failed
		b.ProbeInterval = min(2*b.ProbeInterval, cfg.MaxProbe)
		b.open(now)
		return b, NoTransition
	case sluice.CircuitOpen: // requests in flight when it opened
		return b, NoTransition
	default:
		if b.Failures < cfg.Threshold {
			return b, NoTransition
		}
		b.OpenedAt = &now
		b.ProbeInterval = cfg.FirstProbe
		b.open(now)
		return b, CircuitOpened
	}
}

// Close closes the circuit by hand, reporting whether it was open.
func (b Breaker) Close() (Breaker, Transition) {
	wasOpen := b.State == sluice.CircuitOpen || b.State == sluice.CircuitHalfOpen
	b = Breaker{State: sluice.CircuitClosed}
	if wasOpen {
		return b, CircuitClosed
	}
	return b, NoTransition
}

func (b *Breaker) open(now time.Time) {
	b.State = sluice.CircuitOpen
	next := now.Add(b.ProbeInterval)
	b.NextProbeAt = &next
}
