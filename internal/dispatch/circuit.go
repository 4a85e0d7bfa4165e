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
// close), the backlog starts from an empty token bucket, and the
// endpoint's parked job is unparked through nudger.
// It runs in one transaction, or in the change its context belongs to
// (store.Change). An endpoint of another tenant is sluice.ErrNotFound.
func CloseCircuit(ctx context.Context, st *store.Store, nudger TxNudger, tenantID, endpointID uuid.UUID) error {
	return st.InTx(ctx, func(stx store.Tx) error {
		tx := &StepTx{st: st, tx: stx}
		locked, err := lockTenantFlow(ctx, tx, tenantID, endpointID)
		if err != nil {
			return err
		}
		before, after := locked.Flow, locked.Flow
		var tr flow.Transition
		if after.Breaker, tr = before.Breaker.Close(); tr != flow.CircuitClosed {
			return nil
		}
		now := time.Now()
		after.Bucket = flow.Bucket{Tokens: 0, At: now}
		if err := tx.SaveFlow(ctx, endpointID, before, after); err != nil {
			return fmt.Errorf("save flow: %w", err)
		}
		ev := locked.Endpoint.Event(sluice.OpEndpointCircuitClosed, sluice.ReasonManual)
		if err := tx.PostOpEvents(ctx, nudger, now, locked.TenantID, []sluice.OpEvent{ev}); err != nil {
			return fmt.Errorf("post operational events: %w", err)
		}
		if err := nudger.Unpark(ctx, tx.Tx(), endpointID, locked.ParkedJobID); err != nil {
			return fmt.Errorf("unpark: %w", err)
		}
		return nil
	})
}

// LiftThrottle ends an endpoint's throttle window by hand, as a success
// would: the window and its count of consecutive 429s are dropped, and the
// endpoint's parked job is unparked through nudger, so its queued
// deliveries go at its rate. An endpoint that is not throttled is left as
// it is. It runs in one transaction, or in the change its context belongs
// to (store.Change). An endpoint of another tenant is sluice.ErrNotFound.
func LiftThrottle(ctx context.Context, st *store.Store, nudger TxNudger, tenantID, endpointID uuid.UUID) error {
	return st.InTx(ctx, func(stx store.Tx) error {
		tx := &StepTx{st: st, tx: stx}
		locked, err := lockTenantFlow(ctx, tx, tenantID, endpointID)
		if err != nil {
			return err
		}
		before, after := locked.Flow, locked.Flow
		if before.Throttle == (flow.Throttle{}) {
			return nil
		}
		after.Throttle = flow.Throttle{}
		if err := tx.SaveFlow(ctx, endpointID, before, after); err != nil {
			return fmt.Errorf("save flow: %w", err)
		}
		if err := nudger.Unpark(ctx, tx.Tx(), endpointID, locked.ParkedJobID); err != nil {
			return fmt.Errorf("unpark: %w", err)
		}
		return nil
	})
}

// lockTenantFlow locks the endpoint's flow state for a change by hand; an
// endpoint of another tenant is sluice.ErrNotFound.
func lockTenantFlow(ctx context.Context, tx *StepTx, tenantID, endpointID uuid.UUID) (LockedFlow, error) {
	locked, err := tx.LockFlow(ctx, endpointID)
	switch {
	case errors.Is(err, sluice.ErrNotFound) || err == nil && locked.TenantID != tenantID:
		return locked, sluice.ErrNotFound
	case err != nil:
		return locked, fmt.Errorf("lock endpoint: %w", err)
	}
	return locked, nil
}
