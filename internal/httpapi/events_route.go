package httpapi

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// checkEvents checks what validating each event alone cannot: that the
// consumers they are addressed to exist (one query for all of them) and
// that their payloads satisfy their types' schemas. Failures are added to v
// under each event's prefix (prefix(i)). Schema validation is bounded per
// request (eventschema.MaxRequestCost), each event by a deadline of CPU
// time (eventschema.MaxEventTime), and stops at the first event that
// fails or is refused; what it cost, its price or the time it took, is
// charged to the tenant's rate bucket (chargeValidation).
func (a *API) checkEvents(w http.ResponseWriter, r *http.Request, tenantID uuid.UUID, evs []sluice.NewEvent, prefix func(int) string, v *sluice.ValidationError) error {
	ctx := r.Context()
	if err := a.checkConsumers(ctx, tenantID, evs, prefix, v); err != nil {
		return err
	}
	schemas, err := a.schemas.Schemas(ctx, tenantID)
	if err != nil {
		return err
	}
	budget := eventschema.NewBudget(eventschema.MaxRequestCost)
	defer func() { a.chargeValidation(w, r, budget.Spent()) }()
	for i, ev := range evs {
		sch := schemas.For(ev.Type)
		if sch == nil {
			continue
		}
		bad, err := sch.Check(ev.Payload, budget)
		switch {
		case err != nil:
			v.Add(prefix(i)+"payload", "%s", err)
			return nil
		case bad != nil:
			v.Add(prefix(i)+"payload"+bad.Location, "does not satisfy the schema of %s: %s", ev.Type, bad.Message)
			return nil
		}
	}
	return nil
}

func (a *API) checkConsumers(ctx context.Context, tenantID uuid.UUID, evs []sluice.NewEvent, prefix func(int) string, v *sluice.ValidationError) error {
	var uids []string
	seen := map[string]bool{}
	for _, ev := range evs {
		if c := ev.Consumer; c != nil && !seen[*c] {
			seen[*c] = true
			uids = append(uids, *c)
		}
	}
	missing, err := a.ctl.MissingConsumers(ctx, tenantID, uids)
	if err != nil || len(missing) == 0 {
		return err
	}
	unknown := map[string]bool{}
	for _, uid := range missing {
		unknown[uid] = true
	}
	for i, ev := range evs {
		if ev.Consumer != nil && unknown[*ev.Consumer] {
			v.Add(prefix(i)+"consumer", "names no consumer of this tenant (create it with PUT /v1/consumers/{uid})")
		}
	}
	return nil
}
