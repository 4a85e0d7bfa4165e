package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/eventschema"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// checkEvents checks what validating each event alone cannot: that the
// consumers they are addressed to exist (one query for all of them) and
// that their payloads satisfy their types' schemas. Failures are added to v
// under each event's prefix (prefix(i)). Schema validation is bounded per
// request (eventschema.MaxRequestCost), each event by a deadline of CPU
// time (eventschema.MaxEventTime), and stops at the first event that
// fails or is refused. What an event's price says its validation will
// cost is paid from the tenant's rate bucket before it is validated
// (payValidation), and whatever it cost beyond that after
// (chargeValidation).
func (a *API) checkEvents(w http.ResponseWriter, r *http.Request, tenantID uuid.UUID, evs []sluice.NewEvent, prefix func(int) string, v *sluice.ValidationError) error {
	ctx := r.Context()
	if err := a.checkConsumers(ctx, tenantID, evs, prefix, v); err != nil {
		return err
	}
	var schemas eventschema.Set
	err := dbwait.Retry(ctx, sluice.Unavailable, func(ctx context.Context) error {
		var err error
		schemas, err = a.schemas.Schemas(ctx, tenantID)
		return err //nolint:wrapcheck // answered by writeError as it is
	})
	if err != nil {
		return err
	}
	var paid uint64
	budget := eventschema.NewBudget(eventschema.MaxRequestCost).PayFirst(func(units uint64) error {
		n, err := a.payValidation(w, r, units)
		paid += n
		return err
	})
	defer func() { a.chargeValidation(w, r, budget.Spent()-paid) }()
	for i, ev := range evs {
		sch := schemas.For(ev.Type)
		if sch == nil {
			continue
		}
		bad, err := sch.Check(ev.Payload, budget)
		var (
			overBudget *eventschema.OverBudgetError
			overTime   *eventschema.OverTimeError
		)
		switch {
		case errors.As(err, &overBudget), errors.As(err, &overTime):
			v.Add(prefix(i)+"payload", "%s", err)
			return nil
		case err != nil:
			return err // payValidation's: 429, or the bucket out of reach
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
	var missing []string
	err := dbwait.Retry(ctx, sluice.Unavailable, func(ctx context.Context) error {
		var err error
		missing, err = a.ctl.MissingConsumers(ctx, tenantID, uids)
		return err //nolint:wrapcheck // answered by writeError as it is
	})
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
