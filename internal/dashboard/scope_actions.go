package dashboard

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// The scope's changes: each looks its object up through the scope first
// (scope.go), so an object outside the scope is sluice.ErrNotFound and
// nothing changes. An endpoint never moves between consumers, and a
// delivery never between endpoints, so the check holds for the change
// that follows it.

// replayDelivery is replay.Delivery for a delivery of the scope.
func (sc scoped) replayDelivery(ctx context.Context, id uuid.UUID, jobs store.JobQueue) (sluice.Delivery, error) {
	if _, _, err := sc.delivery(ctx, id); err != nil {
		return sluice.Delivery{}, err
	}
	return replay.Delivery(ctx, sc.st, sc.tenant, id, jobs)
}

// retryDelivery is replay.Retry for a delivery of the scope.
func (sc scoped) retryDelivery(ctx context.Context, id uuid.UUID, jobs store.JobQueue) (sluice.Delivery, error) {
	if _, _, err := sc.delivery(ctx, id); err != nil {
		return sluice.Delivery{}, err
	}
	return replay.Retry(ctx, sc.st, sc.tenant, id, jobs)
}

// replayEndpoint is replay.Endpoint for an endpoint of the scope.
func (sc scoped) replayEndpoint(ctx context.Context, id uuid.UUID, f sluice.ReplayFilter, jobs store.JobQueue) (int64, error) {
	if _, err := sc.endpoint(ctx, id); err != nil {
		return 0, err
	}
	return replay.Endpoint(ctx, sc.st, sc.tenant, id, f, jobs)
}
