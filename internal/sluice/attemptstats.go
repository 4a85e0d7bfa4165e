package sluice

import "time"

// AttemptBucket is what came of an endpoint's attempts in one time bucket.
// Failed counts every attempt that is neither 2xx nor 429 (no response
// included); 429s are counted apart, as Throttled.
type AttemptBucket struct {
	Start     time.Time
	Delivered int64
	Throttled int64
	Failed    int64
	// P50MS and P95MS are latency percentiles (interpolated), 0 when the
	// bucket has no attempts.
	P50MS float64
	P95MS float64
}

// Attempts is how many attempts the bucket holds.
func (b AttemptBucket) Attempts() int64 { return b.Delivered + b.Throttled + b.Failed }
