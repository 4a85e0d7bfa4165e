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
	sc := d.in(r)
	ep, err := d.ctl.Endpoint(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	page, err := d.ctl.Deliveries(r.Context(), caller(r), f, p)
	if err != nil {
		return err
	}
	v := web.EndpointView{Endpoint: ep, Deliveries: page.Items, Filters: filters, Older: olderURL(r, page.Next),
		Queued: queuedFlash(r), Flash: doneFlash(r),
		Next: nextAttempts(page.Items, map[uuid.UUID]sluice.Endpoint{ep.ID: ep}, d.now())}
	if v.Filters.Types, err = sc.catalogueNames(r.Context()); err != nil {
		return err
	}
	if v.Subscriptions, v.SubscriptionFilters, err = d.subscriptions(r, id); err != nil {
		return err
	}
	if v.Replayable, err = sc.countReplayable(r.Context(), id, sluice.ReplayFilter{Status: sluice.DeliveryDead}); err != nil {
		return err
	}
	if v.Replays, err = d.replayMarks(r.Context(), page.Items); err != nil {
		return err
	}
	if v.Charts, err = sc.attemptCharts(r.Context(), id, d.now()); err != nil {
		return err
	}
	if v.RateChart, err = sc.rateChart(r.Context(), ep, d.now()); err != nil {
		return err
	}
	if ep.Delivery == sluice.DeliveryPoll {
		c, err := d.store.PollCursor(r.Context(), ep.ID)
		if err != nil {
			return err
		}
		v.Poll = &web.PollState{LastPosition: c.LastPosition, ReadPosition: c.ReadPosition, ReadAt: c.ReadAt}
	}
	return d.render(w, r, http.StatusOK, web.EndpointPage(chrome(r, web.SectionEndpoints), v))
}

// subscriptions are the event-type patterns an endpoint of the session's
// scope is subscribed to, across its subscriptions, in order and without
// repeats, and their payload filters, each once ("" for a subscription
// without one, listed only beside filtered ones: it lets every event
// through).
func (d *Dashboard) subscriptions(r *http.Request, endpointID uuid.UUID) (patterns, filters []string, err error) {
	page, err := d.ctl.Subscriptions(r.Context(), caller(r), &endpointID, sluice.PageParams{Limit: sluice.MaxPageLimit})
	if err != nil {
		return nil, nil, err
	}
	seen, seenFilter := map[string]bool{}, map[string]bool{}
	for i := len(page.Items) - 1; i >= 0; i-- { // oldest first
		sub := page.Items[i]
		for _, p := range sub.EventTypes {
			if !seen[p] {
				seen[p] = true
				patterns = append(patterns, p)
			}
		}
		if f := string(sub.Filter); !seenFilter[f] {
			seenFilter[f] = true
			filters = append(filters, f)
		}
	}
	if len(filters) == 1 && filters[0] == "" {
		filters = nil
	}
	return patterns, filters, nil
}
