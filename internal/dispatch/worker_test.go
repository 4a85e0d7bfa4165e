package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/store"
)

// startWorker runs a dispatch worker of st under River on pool, with up to
// maxRuns runs at once, sending to loopback within deliveryTimeout and
// retrying after a minute; it returns the worker's Nudger. Both stop when
// the test ends.
func startWorker(t *testing.T, st *store.Store, pool *pgxpool.Pool, maxRuns int, deliveryTimeout time.Duration) *dispatch.Nudger {
	t.Helper()
	workers := river.NewWorkers()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Workers: workers, FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Queues: map[string]river.QueueConfig{jobs.QueueDispatch: {MaxWorkers: maxRuns}},
	})
	require.NoError(t, err)
	nudger := dispatch.NewNudger(st, jobs.NewQueue(client), dispatch.NudgerConfig{})
	w, err := dispatch.NewWorker(st, dispatch.Config{
		Sender: send.New(send.Config{AllowPrivate: true}), DeliveryTimeout: deliveryTimeout, Nudger: nudger,
		Retry: dispatch.Retry{Schedule: []time.Duration{time.Minute}},
	})
	require.NoError(t, err)
	river.AddWorker(workers, w)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
		w.Close()
	})
	return nudger
}
