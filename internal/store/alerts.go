package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Alert is an email to an endpoint's owner about an operational event
// (InsertOpEvents queues it), with where it goes.
type Alert struct {
	ID          uuid.UUID
	EventType   string // a sluice.Op* type
	Payload     []byte // the event's payload, a sluice.OpPayload
	TenantName  string
	AlertEmail  string // the owner's: the consumer's alert address, else the tenant's
	EndpointURL string // the endpoint's URL now
	CreatedAt   time.Time
	Sent        bool
}

// GetAlert returns one alert.
func (s *Store) GetAlert(ctx context.Context, id uuid.UUID) (Alert, error) {
	r, err := s.q.GetAlert(ctx, id)
	if err != nil {
		return Alert{}, notFound(err)
	}
	return Alert{
		ID: r.ID, EventType: r.EventType, Payload: r.Payload, TenantName: r.TenantName, AlertEmail: r.AlertEmail,
		EndpointURL: r.EndpointUrl, CreatedAt: r.CreatedAt, Sent: r.SentAt != nil,
	}, nil
}

// MarkAlertSent records an alert's email as sent and runs done (the job
// completing itself) in the same transaction.
func (s *Store) MarkAlertSent(ctx context.Context, id uuid.UUID, done TxHook) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.WithTx(tx).MarkAlertSent(ctx, id); err != nil {
			return fmt.Errorf("mark alert sent: %w", err)
		}
		return done(ctx, tx)
	})
}
