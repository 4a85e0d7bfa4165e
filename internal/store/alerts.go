package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Alert is an email to an endpoint's owner about an operational event
// (notify.PostOpEvents queues it), with where it goes.
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
