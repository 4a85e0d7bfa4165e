//go:build !race

package eventschema

// raceSlowdown stretches validation deadlines under the race detector
// (deadline_race.go); without it, not at all.
const raceSlowdown = 1
