package store

import (
	"context"
	"fmt"
	"time"
)

// QueueStats is the state of all endpoints' queues at one moment.
type QueueStats struct {
	// Due is the number of deliveries due now (pending or waiting to retry).
	Due int64
	// OldestDueAge is how long ago the longest-waiting of them came due
	// (zero if none).
	OldestDueAge time.Duration
	// EndpointsByState counts endpoints by status: active, throttled,
	// circuit_open, disabled.
	EndpointsByState map[string]int64
}

// QueueStats reads the queue's state for /metrics.
func (s *Store) QueueStats(ctx context.Context) (QueueStats, error) {
	due, err := s.q.DueDeliveryStats(ctx)
	if err != nil {
		return QueueStats{}, fmt.Errorf("due deliveries: %w", err)
	}
	rows, err := s.q.EndpointsByState(ctx)
	if err != nil {
		return QueueStats{}, fmt.Errorf("endpoints by state: %w", err)
	}
	st := QueueStats{Due: due.Due, OldestDueAge: time.Duration(due.OldestAgeSeconds * float64(time.Second)),
		EndpointsByState: map[string]int64{}}
	for _, r := range rows {
		st.EndpointsByState[r.State] = r.N
	}
	return st, nil
}
