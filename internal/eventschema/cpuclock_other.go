//go:build !linux

package eventschema

import "time"

// threadCPU is, where a thread's CPU time cannot be read, the time since
// the process started: validation is then bounded and charged by the
// clock on the wall, which a busy machine stretches.
func threadCPU() time.Duration {
	return time.Since(processStart)
}
