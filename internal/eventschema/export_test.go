package eventschema

import "time"

// Test hooks.

// pricesOnly is a budget of units whose clock stands still: it charges
// prices only, never the time taken, and no deadline passes.
func pricesOnly(units uint64) *Budget {
	return &Budget{left: units, clock: func() time.Duration { return 0 }}
}

// budgetOn is a budget of units timed by clock instead of the thread's
// CPU time.
func budgetOn(units uint64, clock func() time.Duration) *Budget {
	return &Budget{left: units, clock: clock}
}

// underpriced is s priced as cheap would be: its validation is what it
// was, its price a mistake.
func underpriced(s, cheap *Schema) *Schema {
	return &Schema{source: s.source, free: s.free, cost: cheap.cost}
}
