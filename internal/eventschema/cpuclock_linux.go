package eventschema

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used. Check locks its
// goroutine to the thread while it validates, so the difference of two
// readings is what the validation cost, whatever else the machine runs.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Since(processStart) // cannot happen on Linux since 2.6.12
	}
	return time.Duration(ts.Nano())
}
