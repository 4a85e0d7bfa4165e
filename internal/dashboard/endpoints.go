package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// listEndpoints is GET /: the tenant's endpoints with their state.
func (d *Dashboard) listEndpoints(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := d.store.ListEndpoints(r.Context(), tenantID(r), p)
	if err != nil {
		return err
	}
	v := web.EndpointsView{Endpoints: page.Items, Older: olderURL(r, page.Next)}
	return d.render(w, r, http.StatusOK, web.EndpointsPage(chrome(r, web.SectionEndpoints), v))
}

// showEndpoint is GET /endpoints/{id}: one endpoint and its delivery
// timeline, optionally of one status.
func (d *Dashboard) showEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	status, err := deliveryStatus(r.URL.Query().Get("status"))
	if err != nil {
		return err
	}
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	ep, err := d.store.GetEndpoint(r.Context(), tenantID(r), id)
	if err != nil {
		return err
	}
	page, err := d.store.ListDeliveries(r.Context(), tenantID(r), sluice.DeliveryFilter{EndpointID: &id, Status: status}, p)
	if err != nil {
		return err
	}
	v := web.EndpointView{Endpoint: ep, Deliveries: page.Items, Older: olderURL(r, page.Next), Queued: queuedFlash(r)}
	if status != nil {
		v.Status = *status
	}
	return d.render(w, r, http.StatusOK, web.EndpointPage(chrome(r, web.SectionEndpoints), v))
}

// replayEndpoint is POST /endpoints/{id}/replay: replays every delivery of
// the endpoint matching the form's filter (status, default dead; optional
// since and until, RFC 3339), then goes back to the page the form was on
// (from: "endpoint" or "dead") with the count to flash.
func (d *Dashboard) replayEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	f := sluice.ReplayFilter{Status: sluice.DeliveryDead}
	if s := r.PostForm.Get("status"); s != "" {
		if s != sluice.DeliveryDead && s != sluice.DeliveryFailed && s != sluice.DeliveryDelivered {
			return errBadRequest("Only dead, failed or delivered deliveries can be replayed in bulk.")
		}
		f.Status = s
	}
	if f.Since, err = formTime(r, "since"); err != nil {
		return err
	}
	if f.Until, err = formTime(r, "until"); err != nil {
		return err
	}
	n, err := d.store.ReplayEndpoint(r.Context(), tenantID(r), id, f, d.jobs)
	if err != nil {
		return err
	}
	queued := strconv.FormatInt(n, 10)
	if r.PostForm.Get("from") == "endpoint" {
		return redirect(w, r, withQuery("/endpoints/"+id.String(), url.Values{"queued": {queued}}))
	}
	return redirect(w, r, withQuery("/dead", url.Values{"endpoint_id": {id.String()}, "queued": {queued}}))
}

// formTime reads an optional RFC 3339 time from the form.
func formTime(r *http.Request, field string) (*time.Time, error) {
	raw := r.PostForm.Get(field)
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, errBadRequest(field + " must be an RFC 3339 time such as 2026-01-02T15:04:05Z.")
	}
	return &t, nil
}
