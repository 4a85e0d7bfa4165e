package poll

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Target is the poll endpoint a read's token names, as it was when looked
// up: its tenant (and whether that tenant is disabled), its id, its
// current secret and how far it has been read.
type Target struct {
	EndpointID     uuid.UUID
	TenantID       uuid.UUID
	Poll           bool   // delivery is "poll"
	Secret         string // the current signing secret
	TenantDisabled bool
	// ReadPosition is the furthest cursor a read has passed, LastPosition
	// the last position given, and Unplaced whether deliveries wait for a
	// position: a read with no cursor past ReadPosition writes nothing
	// unless Unplaced, and one at LastPosition has nothing to answer.
	ReadPosition int64
	LastPosition int64
	Unplaced     bool
}

// readTarget reads the endpoint a poll token names, with its current
// secret; sluice.ErrNotFound if there is none. The statement runs alone,
// in one round trip (store.OneShot without settings).
func readTarget(ctx context.Context, st *store.Store, endpointID uuid.UUID) (Target, error) {
	row, err := st.OneShot(nil).PollEndpoint(ctx, endpointID)
	if err != nil {
		return Target{}, fmt.Errorf("look up poll endpoint: %w", store.NotFound(err))
	}
	secret, err := st.OpenSecret(row.SecretEnc)
	if err != nil {
		return Target{}, fmt.Errorf("open poll endpoint's secret: %w", err)
	}
	return Target{
		EndpointID: row.ID, TenantID: row.TenantID, Poll: row.Delivery == sluice.DeliveryPoll,
		Secret: string(secret), TenantDisabled: row.TenantDisabled,
		ReadPosition: row.ReadPosition, LastPosition: row.LastPosition, Unplaced: row.Unplaced,
	}, nil
}

// Item is one delivery on a poll page: its position and its event.
type Item struct {
	Position  int64
	EventID   uuid.UUID
	Type      string
	Payload   []byte
	CreatedAt time.Time
}

// pollItems maps rows of the PollPage statement, up to the first whose
// payload it left out (past sluice.MaxPageBytes): the page ends before
// it, and the next starts there.
func pollItems(rows []dbq.PollPageRow) []Item {
	out := make([]Item, 0, len(rows))
	for _, r := range rows {
		if r.Payload == nil && len(out) > 0 {
			break
		}
		out = append(out, Item{Position: r.Place, EventID: r.EventID, Type: r.Type, Payload: r.Payload, CreatedAt: r.CreatedAt})
	}
	return out
}

// openItems opens the sealed payloads of a tenant's items in place (a
// clear one is left as it is).
func openItems(ctx context.Context, pl *secretbox.Payloads, tenantID uuid.UUID, items []Item) error {
	for i := range items {
		payload, err := pl.OpenJSON(ctx, tenantID, items[i].Payload)
		if err != nil {
			return fmt.Errorf("open payload of event %s: %w", items[i].EventID, err)
		}
		items[i].Payload = payload
	}
	return nil
}
