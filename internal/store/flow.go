package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"time"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Flow is an endpoint's flow-control state: its token bucket, circuit
// breaker and throttle window (zero when not throttled).
type Flow struct {
	Bucket   flow.Bucket
	Breaker  flow.Breaker
	Throttle flow.Throttle
}

func flowFromRow(r dbq.LockEndpointForDispatchRow) Flow {
	e := r.Endpoint
	f := Flow{Breaker: breakerFromRow(e)}
	if e.BucketTokens != nil && e.BucketAt != nil {
		f.Bucket = flow.Bucket{Tokens: *e.BucketTokens, At: *e.BucketAt}
	}
	if r.ThrottledUntil != nil {
		f.Throttle = flow.Throttle{Until: *r.ThrottledUntil, Reason: *r.ThrottleReason, Count: int(*r.Consecutive429s)}
	}
	return f
}

func breakerFromRow(e dbq.Endpoint) flow.Breaker {
	b := flow.Breaker{
		State: e.CircuitState, Failures: int(e.ConsecutiveFailures),
		OpenedAt: e.CircuitOpenedAt, NextProbeAt: e.CircuitNextProbeAt,
	}
	if e.CircuitProbeMs != nil {
		b.ProbeInterval = time.Duration(*e.CircuitProbeMs) * time.Millisecond
	}
	if e.LastError != nil {
		b.LastError = *e.LastError
	}
	return b
}

func saveFlowParams(id uuid.UUID, f Flow) dbq.SaveFlowParams {
	p := dbq.SaveFlowParams{
		ID:                  id,
		CircuitState:        f.Breaker.State,
		ConsecutiveFailures: int32(f.Breaker.Failures),
		CircuitOpenedAt:     f.Breaker.OpenedAt,
		CircuitNextProbeAt:  f.Breaker.NextProbeAt,
	}
	if p.CircuitState == "" {
		p.CircuitState = sluice.CircuitClosed
	}
	if !f.Bucket.At.IsZero() {
		p.BucketTokens, p.BucketAt = new(f.Bucket.Tokens), new(f.Bucket.At)
	}
	if f.Breaker.ProbeInterval > 0 {
		p.CircuitProbeMs = new(f.Breaker.ProbeInterval.Milliseconds())
	}
	if f.Breaker.LastError != "" {
		p.LastError = new(f.Breaker.LastError)
	}
	return p
}

// CloseCircuit closes an endpoint's circuit by hand. If it was open, the
// tenant is told (one alert, as for any close), the backlog starts from an
// empty token bucket, and the endpoint's parked dispatch is unparked.
func (s *Store) CloseCircuit(ctx context.Context, tenantID, endpointID uuid.UUID, jobs JobQueue) (sluice.Endpoint, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockEndpointForDispatch(ctx, endpointID)
		if err != nil || row.Endpoint.TenantID != tenantID {
			return sluice.ErrNotFound
		}
		before := flowFromRow(row)
		after := before
		var tr flow.Transition
		if after.Breaker, tr = before.Breaker.Close(); tr != flow.CircuitClosed {
			return nil
		}
		after.Bucket = flow.Bucket{Tokens: 0, At: time.Now()}
		if err := s.saveFlow(ctx, q, endpointID, before, after); err != nil {
			return err
		}
		if err := s.insertAlerts(ctx, tx, row.Endpoint.TenantID, endpointID, []Alert{{Opened: false}}, jobs); err != nil {
			return err
		}
		return jobs.Unpark(ctx, tx, endpointID, row.Endpoint.ParkedJobID)
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return s.GetEndpoint(ctx, tenantID, endpointID)
}
