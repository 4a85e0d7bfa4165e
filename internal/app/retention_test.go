package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/receiver"
	"github.com/sluice-dev/sluice/internal/retention"
)

// TestRetentionDeletesOldDeliveredKeepsDead: delivered deliveries go after
// SLUICE_RETENTION, dead ones are kept for replay until
// SLUICE_DEAD_RETENTION.
func TestRetentionDeletesOldDeliveredKeepsDead(t *testing.T) {
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms"})
	ok, bad := receiver.New(t), receiver.New(t)
	bad.Answer(receiver.Behavior{Status: 500})
	okID, _ := h.endpoint(ok, []string{"*"}, nil)
	badID, _ := h.endpoint(bad, []string{"*"}, nil)
	h.post("keep.or.drop", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool {
		return len(h.deliveries("status=delivered&endpoint_id="+okID)) == 1 &&
			len(h.deliveries("status=dead&endpoint_id="+badID)) == 1
	}, "one delivered, one dead")

	// Nothing is old enough yet.
	work := func(delivered, dead time.Duration) {
		w := retention.NewWorker(h.proc.Store, retention.Config{Delivered: delivered, Dead: dead})
		require.NoError(t, w.Work(context.Background(), &river.Job[jobs.RetentionArgs]{}))
	}
	work(time.Hour, time.Hour)
	require.Len(t, h.deliveries("endpoint_id="+okID), 1)

	time.Sleep(20 * time.Millisecond)
	work(10*time.Millisecond, time.Hour)
	require.Empty(t, h.deliveries("endpoint_id="+okID), "delivered and old: deleted")
	require.Len(t, h.deliveries("status=dead&endpoint_id="+badID), 1, "dead ones are kept for replay")
	var attempts int
	require.NoError(t, h.proc.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`, okID).Scan(&attempts))
	require.Zero(t, attempts)
	var orphans int
	require.NoError(t, h.proc.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM delivery_attempts a WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)`).Scan(&orphans))
	require.Zero(t, orphans, "attempts go with their delivery")

	work(10*time.Millisecond, 10*time.Millisecond)
	require.Empty(t, h.deliveries("endpoint_id="+badID), "dead and past SLUICE_DEAD_RETENTION: deleted")
}
