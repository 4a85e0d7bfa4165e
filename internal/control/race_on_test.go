//go:build race

package control_test

// raceEnabled is whether the race detector is on: timings mean nothing then.
const raceEnabled = true
