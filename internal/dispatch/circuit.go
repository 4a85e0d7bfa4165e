package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// CloseCircuit closes an endpoint's circuit by hand. If it was open, the
// owner is told (sluice.endpoint.circuit_closed and its email, as for any
// close), the backlog starts from an
// empty token bucket, and the endpoint's parked job is unparked through
// jobs (the process's Nudger). An endpoint of another tenant is
// sluice.ErrNotFound.
func CloseCircuit(ctx context.Context, st *store.Store, jobs store.JobQueue, tenantID, endpointID uuid.UUID) (sluice.Endpoint, error) {
	tx, err := beginStep(ctx, st, store.StepSettings{}) // by hand, rare: no settings
	if err != nil {
		return sluice.Endpoint{}, fmt.Errorf("begin close circuit: %w", err)
	}
	defer tx.Rollback(ctx)
	locked, err := tx.LockFlow(ctx, endpointID)
	switch {
	case errors.Is(err, sluice.ErrNotFound) || err == nil && locked.TenantID != tenantID:
		return sluice.Endpoint{}, sluice.ErrNotFound
	case err != nil:
		return sluice.Endpoint{}, fmt.Errorf("lock endpoint: %w", err)
	}
	before, after := locked.Flow, locked.Flow
	var tr flow.Transition
	if after.Breaker, tr = before.Breaker.Close(); tr == flow.CircuitClosed {
		now := time.Now()
		after.Bucket = flow.Bucket{Tokens: 0, At: now}
		if err := tx.SaveFlow(ctx, endpointID, before, after); err != nil {
			return sluice.Endpoint{}, fmt.Errorf("save flow: %w", err)
		}
		ev := locked.Endpoint.Event(sluice.OpEndpointCircuitClosed, sluice.ReasonManual)
		if err := tx.PostOpEvents(ctx, jobs, now, locked.TenantID, []sluice.OpEvent{ev}); err != nil {
			return sluice.Endpoint{}, fmt.Errorf("post operational events: %w", err)
		}
		if err := jobs.Unpark(ctx, tx.Tx(), endpointID, locked.ParkedJobID); err != nil {
			return sluice.Endpoint{}, fmt.Errorf("unpark: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return sluice.Endpoint{}, fmt.Errorf("commit close circuit: %w", err)
	}
	ep, err := st.GetEndpoint(ctx, tenantID, endpointID)
	if err != nil {
		return sluice.Endpoint{}, fmt.Errorf("read endpoint: %w", err)
	}
	return ep, nil
}
