package httpapi

import (
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// deliveryWithAttempts is GET /v1/deliveries/{id}: the delivery and its
// attempt log.
type deliveryWithAttempts struct {
	sluice.Delivery
	Attempts []sluice.Attempt `json:"attempts"`
}

func (a *API) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	q := r.URL.Query()
	f := sluice.DeliveryFilter{
		EndpointID: queryID(r, "endpoint_id", v), EventID: queryID(r, "event_id", v),
		Status: queryValue(q, "status"), EventType: queryValue(q, "event_type"), Consumer: queryValue(q, "consumer"),
		StatusCode: queryValue(q, "status_code"),
		Since:      queryTime(q, "since", v), Until: queryTime(q, "until", v),
	}
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.Deliveries(r.Context(), caller(r), f, p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "delivery")
	if err != nil {
		return err
	}
	d, attempts, err := a.ctl.Delivery(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, deliveryWithAttempts{Delivery: d, Attempts: attempts})
	return nil
}

// replayDelivery is POST /v1/deliveries/{id}/replay: a new delivery of a
// delivered or dead one (409 for a queued one, or while the event already
// has a delivery queued to the endpoint).
func (a *API) replayDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "delivery")
	if err != nil {
		return err
	}
	d, err := a.ctl.ReplayDelivery(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, d)
	return nil
}

// retryDelivery is POST /v1/deliveries/{id}/retry: makes a pending or
// failed delivery due now, without a new delivery (409 for a delivered or
// dead one, which is replayed instead).
func (a *API) retryDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "delivery")
	if err != nil {
		return err
	}
	d, err := a.ctl.RetryDelivery(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, d)
	return nil
}

type replayInput struct {
	Status *string `json:"status"`
	Since  *string `json:"since"`
	Until  *string `json:"until"`
}

// timeField parses an optional RFC 3339 time.
func timeField(raw *string, field string, v *sluice.ValidationError) *time.Time {
	if raw == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, *raw)
	if err != nil {
		v.Add(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		return nil
	}
	return &t
}

// replayEndpoint is POST /v1/endpoints/{id}/replay: replays the newest
// delivery of each event to the endpoint that matches the filter, once, and
// answers how many it queued.
func (a *API) replayEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "endpoint")
	if err != nil {
		return err
	}
	var in replayInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
			return err
		}
	}
	v := &sluice.ValidationError{}
	f := sluice.ReplayFilter{Status: sluice.DeliveryDead, Since: timeField(in.Since, "since", v), Until: timeField(in.Until, "until", v)}
	if in.Status != nil {
		f.Status = *in.Status
	}
	if err := v.Err(); err != nil {
		return err
	}
	n, err := a.ctl.ReplayEndpoint(r.Context(), caller(r), id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]int64{"queued": n})
	return nil
}
