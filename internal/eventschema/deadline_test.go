package eventschema

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// probeEvent is the probe's event: a string of n "a"s and a "b", which
// the pattern "^(a+)+$" reads whole at every one of its 900 leaves.
func probeEvent(n int) []byte {
	return []byte(`{"s":"` + strings.Repeat("a", n) + `b"}`)
}

// TestDeadlineStopsAnUnderpricedEvent: the probe's schema priced as if it
// were empty admits the probe's event (17 s of CPU to validate, the
// probe found); the deadline stops its validation at MaxEventTime of CPU,
// a match or so past it, whether the event would pass or fail, and
// charges the time taken. The copy of the validator it stopped validates
// the next event as usual.
func TestDeadlineStopsAnUnderpricedEvent(t *testing.T) {
	t.Parallel()
	cheap, err := Compile([]byte(`{}`))
	require.NoError(t, err)
	for _, last := range []string{"b$", ""} {
		probe, err := Compile([]byte(patternProbe(30, 30, last)))
		require.NoError(t, err)
		sch := underpriced(probe, cheap)
		b := NewBudget(MaxRequestCost)
		start := time.Now()
		v, err := sch.Check(probeEvent(250_000), b)
		elapsed := time.Since(start)
		require.Nil(t, v)
		var over *OverTimeError
		require.ErrorAs(t, err, &over, "last %q", last)
		require.Equal(t, MaxEventTime*raceSlowdown, over.Limit)
		require.Contains(t, err.Error(), "of CPU time to validate against its schema, "+
			"and validating an event may take 100ms or twice its price at 1µs a unit, a request's events 500ms together")
		took := time.Duration(b.Spent()) * unitTime
		t.Logf("stopped after %v of CPU, %v on the wall", took, elapsed)
		require.GreaterOrEqual(t, took, over.Limit, "charged the time taken, not the price")
		require.Less(t, took, over.Limit+100*time.Millisecond*raceSlowdown, "stopped a match or so past the deadline")

		require.Nil(t, must(probe.Check([]byte(`{"s":"aaa"}`), NewBudget(MaxRequestCost))), "the same copy, reused")
		require.Len(t, probe.free, 1, "one copy, back among the idle ones")
	}
}

// ticks is a clock that moves on by step at every reading.
func ticks(step time.Duration) func() time.Duration {
	var now time.Duration
	return func() time.Duration { now += step; return now }
}

// TestDeadlineIsWhatTheRequestHasLeft: an event's deadline is no more than
// what is left of its request's budget; an event that took longer than
// its price is charged the time.
func TestDeadlineIsWhatTheRequestHasLeft(t *testing.T) {
	t.Parallel()
	cheap, err := Compile([]byte(`{}`))
	require.NoError(t, err)
	probe, err := Compile([]byte(patternProbe(30, 30, "b$")))
	require.NoError(t, err)

	b := budgetOn(5000, ticks(time.Millisecond)) // 5 ms left
	_, err = underpriced(probe, cheap).Check(probeEvent(10_000), b)
	var over *OverTimeError
	require.ErrorAs(t, err, &over)
	require.Equal(t, 5*time.Millisecond*raceSlowdown, over.Limit)
	require.GreaterOrEqual(t, b.Spent(), uint64(5000))

	// Two readings a millisecond apart: a millisecond, 1000 units, more
	// than the price.
	b = budgetOn(MaxRequestCost, ticks(time.Millisecond))
	require.Nil(t, must(cheap.Check([]byte(`{"s":"b"}`), b)))
	require.Equal(t, uint64(1000), b.Spent())
	require.Equal(t, uint64(1000), toUnits(time.Millisecond))

	// MaxEventTime for a cheap event, twice the price of a dear one.
	require.Equal(t, MaxEventTime*raceSlowdown, eventDeadline(10, MaxRequestCost))
	require.Equal(t, 400*time.Millisecond*raceSlowdown, eventDeadline(200_000, MaxRequestCost))
	require.Equal(t, 300*time.Millisecond*raceSlowdown, eventDeadline(200_000, 300_000))
}

// TestDeadlinesOfConcurrentChecks: validations of one schema at once use
// copies of its validator, each its own deadline: one stopped does not
// stop the others, and the others do not extend it.
func TestDeadlinesOfConcurrentChecks(t *testing.T) {
	t.Parallel()
	cheap, err := Compile([]byte(`{}`))
	require.NoError(t, err)
	probe, err := Compile([]byte(patternProbe(30, 30, "b$")))
	require.NoError(t, err)
	slow := underpriced(probe, cheap)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		wg.Go(func() {
			if i%4 == 0 {
				_, err := slow.Check(probeEvent(250_000), NewBudget(MaxRequestCost))
				var over *OverTimeError
				if !errors.As(err, &over) {
					errs <- err
				}
				return
			}
			for range 20 {
				v, err := probe.Check([]byte(`{"s":"aaab"}`), NewBudget(MaxRequestCost))
				if v != nil || err != nil {
					errs <- errors.Join(err, errors.New("a short event refused"))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(probe.free), freeValidators)
}

// TestPayFirst: a budget's payer is asked for each payload's price before
// the payload is validated; its refusal refuses the payload unvalidated.
func TestPayFirst(t *testing.T) {
	t.Parallel()
	sch, err := Compile([]byte(invoice))
	require.NoError(t, err)
	var asked []uint64
	refuse := errors.New("no tokens")
	b := pricesOnly(MaxRequestCost).PayFirst(func(units uint64) error {
		asked = append(asked, units)
		if len(asked) > 1 {
			return refuse
		}
		return nil
	})
	require.Nil(t, must(sch.Check([]byte(`{"amount":1}`), b)))
	spent := b.Spent()
	require.Equal(t, []uint64{spent}, asked, "asked the price")
	v, err := sch.Check([]byte(`{"amount":-1}`), b)
	require.Nil(t, v, "not validated")
	require.ErrorIs(t, err, refuse)
	require.Equal(t, spent, b.Spent(), "nothing more spent")
}
