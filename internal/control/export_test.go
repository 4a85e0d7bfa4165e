package control

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// WatchForget makes c call f where it tells its poll reader to forget an
// endpoint.
func WatchForget(c *Control, f func(endpointID uuid.UUID)) { c.forget = f }

// SendTestEvent is what TestEndpoint stores and queues, outside a change: no
// audit entry.
func SendTestEvent(ctx context.Context, c *Control, ep sluice.Endpoint) (sluice.Event, error) {
	return c.testEvent(ctx, ep, []byte(`{}`))
}
