package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// showDelivery is GET /deliveries/{id}: a delivery and its attempts.
func (d *Dashboard) showDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ctx, who := r.Context(), caller(r)
	del, attempts, err := d.ctl.Delivery(ctx, who, id)
	if err != nil {
		return err
	}
	v := web.DeliveryView{Delivery: del, Attempts: attempts,
		Replayed: r.URL.Query().Get("replayed") == "1", Retried: r.URL.Query().Get("retried") == "1"}
	ep, err := d.ctl.Endpoint(ctx, who, del.EndpointID)
	switch {
	case err == nil:
		v.Endpoint = &ep
		v.Next = nextAttempt(del, &ep, d.now())
	case errors.Is(err, sluice.ErrNotFound):
		v.Next = nextAttempt(del, nil, d.now())
	default:
		return err
	}
	return d.render(w, r, http.StatusOK, web.DeliveryPage(chrome(r, ""), v))
}

// nextAttempt is when a delivery will really be attempted next, given its
// endpoint's state at now: not before the endpoint's throttle lifts or its
// open circuit's next probe, and "due now" rather than a time in the
// past. It is nil for a delivery that is done (delivered or dead).
// nextAttempts is nextAttempt of each delivery, by delivery id, with the
// endpoints it was sent to (nil entries for those not listed).
func nextAttempts(ds []sluice.Delivery, endpoints map[uuid.UUID]sluice.Endpoint, now time.Time) map[uuid.UUID]*web.NextAttempt {
	out := make(map[uuid.UUID]*web.NextAttempt, len(ds))
	for _, d := range ds {
		var ep *sluice.Endpoint
		if e, ok := endpoints[d.EndpointID]; ok {
			ep = &e
		}
		out[d.ID] = nextAttempt(d, ep, now)
	}
	return out
}

func nextAttempt(del sluice.Delivery, ep *sluice.Endpoint, now time.Time) *web.NextAttempt {
	if del.NextAttemptAt == nil || (del.Status != sluice.DeliveryPending && del.Status != sluice.DeliveryFailed) {
		return nil
	}
	n := web.NextAttempt{At: *del.NextAttemptAt}
	if ep != nil {
		n.Paused = ep.Disabled
		if u := ep.ThrottledUntil; u != nil && u.After(n.At) {
			n.At, n.Reason = *u, "throttled"
		}
		if p := ep.Circuit.NextProbeAt; ep.Circuit.State == sluice.CircuitOpen && p != nil && p.After(n.At) {
			n.At, n.Reason = *p, "circuit open: next probe"
		}
	}
	if !n.At.After(now) {
		n.At, n.DueNow, n.Reason = now, true, ""
	}
	return &n
}

// replayDelivery is POST /deliveries/{id}/replay: queues a new delivery of
// the same event to the same endpoint and shows it.
func (d *Dashboard) replayDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	replay, err := d.ctl.ReplayDelivery(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	return redirect(w, r, "/deliveries/"+replay.ID.String()+"?replayed=1")
}

// listDead is GET /dead: dead deliveries, newest first, optionally of one
// endpoint (?endpoint_id=), filtered by event type and creation time.
func (d *Dashboard) listDead(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	ctx, who := r.Context(), caller(r)
	v := web.DeadView{Queued: queuedFlash(r), Filters: web.DeliveryFilters{Path: "/dead", Now: d.now()}}
	dead := sluice.DeliveryDead
	f := sluice.DeliveryFilter{Status: &dead}
	if err := deliveryFilters(r, false, &f, &v.Filters); err != nil {
		return err
	}
	if raw := r.URL.Query().Get("endpoint_id"); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			return errNotFound()
		}
		if _, err := d.ctl.Endpoint(ctx, who, id); err != nil {
			return err
		}
		v.Filter = &id
	}
	endpoints, err := d.ctl.Endpoints(ctx, who, nil, sluice.PageParams{Limit: sluice.MaxPageLimit})
	if err != nil {
		return err
	}
	v.Endpoints = endpoints.Items
	v.Filters.Endpoints, v.Filters.Endpoint = endpoints.Items, v.Filter
	if who.Consumer == nil { // a portal session's list is its consumer's
		if err := d.consumerFilter(ctx, r, who, &f, &v.Filters); err != nil {
			return err
		}
	}
	if v.Filters.Types, err = d.catalogueNames(ctx, who); err != nil {
		return err
	}
	f.EndpointID = v.Filter
	page, err := d.ctl.Deliveries(ctx, who, f, p)
	if err != nil {
		return err
	}
	v.Deliveries, v.Older = page.Items, olderURL(r, page.Next)
	if v.Filter != nil {
		v.ReplayTargets = []uuid.UUID{*v.Filter}
	} else {
		v.ReplayTargets = endpointIDs(page.Items)
	}
	eps, err := d.ctl.EndpointsByID(ctx, who, v.ReplayTargets, v.Endpoints)
	if err != nil {
		return err
	}
	v.EndpointsByID = eps
	v.Replayable = map[uuid.UUID]int64{}
	for _, id := range v.ReplayTargets {
		n, err := d.ctl.CountReplayable(ctx, who, id, sluice.ReplayFilter{Status: sluice.DeliveryDead})
		if err != nil {
			return err
		}
		if n > 0 {
			v.Replayable[id] = n
		}
	}
	if v.Replays, err = d.replayMarks(ctx, who, page.Items); err != nil {
		return err
	}
	if v.LastAttempts, err = d.ctl.LastAttempts(ctx, who, page.Items); err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, web.DeadPage(chrome(r, web.SectionDead), v))
}

// consumerFilter reads the dead letters' consumer filter (?consumer=, a
// uid) and offers the tenant's consumers, when it has any.
func (d *Dashboard) consumerFilter(ctx context.Context, r *http.Request, who control.Caller, f *sluice.DeliveryFilter, v *web.DeliveryFilters) error {
	consumers, err := d.ctl.Consumers(ctx, who, sluice.PageParams{Limit: sluice.MaxPageLimit})
	if err != nil {
		return err
	}
	if len(consumers.Items) > 0 {
		v.Consumers = consumers.Items
	}
	if uid := strings.TrimSpace(r.URL.Query().Get("consumer")); uid != "" {
		f.Consumer, v.Consumer = &uid, uid
	}
	return nil
}

// catalogueNames are the names of the event types who's endpoints
// subscribe from (control.Catalogue), which the deliveries filters offer.
func (d *Dashboard) catalogueNames(ctx context.Context, who control.Caller) ([]string, error) {
	types, err := d.ctl.Catalogue(ctx, who)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = t.Name
	}
	return out, nil
}
