package ingest

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// CommitTogether commits events posted by separate requests, ctxs[j]
// posting evs[j], as one group: as the group commit does with posts that
// arrive together.
func (i *Ingester) CommitTogether(ctxs []context.Context, tenantID uuid.UUID, evs []sluice.NewEvent) ([]sluice.Event, error) {
	group := make([]posted, len(evs))
	for j, ev := range evs {
		group[j] = i.post(ctxs[j], tenantID, ev)
	}
	return i.commitGroup(ctxs[0], group)
}
