//go:build race

package eventschema

// raceSlowdown stretches validation deadlines under the race detector,
// which makes validation about ten times slower, so that an event
// validates under -race as it does without.
const raceSlowdown = 10
