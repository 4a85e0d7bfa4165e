package ingest

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// CommitTogether commits events posted by separate requests, ctxs[j]
// posting evs[j], as one group: as the group commit does with posts that
// arrive together.
func (i *Ingester) CommitTogether(ctxs []context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	group := make([]fanout.TenantEvent, len(evs))
	for j, ev := range evs {
		ev.TraceContext = tracing.Carry(ctxs[j])
		group[j] = fanout.TenantEvent{TenantID: tenantID, Event: ev}
	}
	return i.commitGroup(ctxs[0], group)
}
