//go:build race

package dispatch_test

// raceAllocs is what the race detector adds to a delivery's allocations.
const raceAllocs = 10.0
