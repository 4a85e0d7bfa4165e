package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CircuitAlert is a circuit transition to email, with what the email names.
type CircuitAlert struct {
	ID          uuid.UUID
	Kind        string // "circuit" (Opened says which way), "disabled" (Reason says why: sluice.DisabledGone or DisabledFailing) or "backlog"
	Reason      string
	TenantName  string
	AlertEmail  string
	EndpointID  uuid.UUID
	EndpointURL string
	Opened      bool
	LastError   string
	Failures    int
	NextProbeAt *time.Time
	CreatedAt   time.Time
	Sent        bool
	// Payload is the operational event's payload, for kind backlog.
	Payload []byte
}

// GetCircuitAlert returns one alert.
func (s *Store) GetCircuitAlert(ctx context.Context, id uuid.UUID) (CircuitAlert, error) {
	r, err := s.q.GetCircuitAlert(ctx, id)
	if err != nil {
		return CircuitAlert{}, notFound(err)
	}
	return CircuitAlert{
		ID: r.ID, Kind: r.Kind, TenantName: r.TenantName, AlertEmail: r.AlertEmail,
		EndpointID: r.EndpointID, EndpointURL: r.EndpointUrl, Opened: r.Opened,
		LastError: r.LastError, Failures: int(r.Failures), NextProbeAt: r.NextProbeAt,
		CreatedAt: r.CreatedAt, Sent: r.SentAt != nil, Reason: deref(r.Reason),
		Payload: r.Payload,
	}, nil
}

// MarkCircuitAlertSent records an alert's email as sent and runs done (the
// job completing itself) in the same transaction.
func (s *Store) MarkCircuitAlertSent(ctx context.Context, id uuid.UUID, done TxHook) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.WithTx(tx).MarkCircuitAlertSent(ctx, id); err != nil {
			return fmt.Errorf("mark circuit alert sent: %w", err)
		}
		return done(ctx, tx)
	})
}
