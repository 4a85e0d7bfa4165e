package dashboard

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// listEndpoints is GET /: the scope's endpoints with their state.
func (d *Dashboard) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.ctl.Endpoints(r.Context(), caller(r), nil, p)
	if err != nil {
		return err
	}
	v := web.EndpointsView{Endpoints: page.Items, Older: olderURL(r, page.Next), Flash: doneFlash(r)}
	return d.render(w, r, http.StatusOK, web.EndpointsPage(chrome(r, web.SectionEndpoints), v))
}

// showEndpoint is GET /endpoints/{id}: one endpoint, its charts and its
// deliveries, filtered by event type, status and creation time.
func (d *Dashboard) showEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	f := sluice.DeliveryFilter{EndpointID: &id}
	filters := web.DeliveryFilters{Path: r.URL.Path, Now: d.now()}
	if err := deliveryFilters(r, true, &f, &filters); err != nil {
		return err
	}
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	ctx, who := r.Context(), caller(r)
	ep, err := d.ctl.Endpoint(ctx, who, id)
	if err != nil {
		return err
	}
	page, err := d.ctl.Deliveries(ctx, who, f, p)
	if err != nil {
		return err
	}
	v := web.EndpointView{Endpoint: ep, Deliveries: page.Items, Filters: filters, Older: olderURL(r, page.Next),
		Queued: queuedFlash(r), Flash: doneFlash(r),
		Next: nextAttempts(page.Items, map[uuid.UUID]sluice.Endpoint{ep.ID: ep}, d.now())}
	if v.Filters.Types, err = d.catalogueNames(ctx, who); err != nil {
		return err
	}
	if v.Subscriptions, v.SubscriptionFilters, err = d.ctl.SubscribedTo(ctx, who, id); err != nil {
		return err
	}
	if v.Replayable, err = d.ctl.CountReplayable(ctx, who, id, sluice.ReplayFilter{Status: sluice.DeliveryDead}); err != nil {
		return err
	}
	if v.Replays, err = d.replayMarks(ctx, who, page.Items); err != nil {
		return err
	}
	if v.Charts, err = d.attemptCharts(ctx, who, id, d.now()); err != nil {
		return err
	}
	if v.RateChart, err = d.rateChart(ctx, who, ep, d.now()); err != nil {
		return err
	}
	if ep.Delivery == sluice.DeliveryPoll {
		c, err := d.ctl.PollCursor(ctx, who, ep.ID)
		if err != nil {
			return err
		}
		v.Poll = &web.PollState{LastPosition: c.LastPosition, ReadPosition: c.ReadPosition, ReadAt: c.ReadAt}
	}
	return d.render(w, r, http.StatusOK, web.EndpointPage(chrome(r, web.SectionEndpoints), v))
}
