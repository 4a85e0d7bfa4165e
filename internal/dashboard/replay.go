package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// replayForm reads the filter and return page of a bulk replay, from the
// query (the confirmation page) or the form (the action): status (dead,
// the default, or delivered), optional since and until (RFC 3339), and
// from ("endpoint" or "dead").
func replayForm(values url.Values) (sluice.ReplayFilter, string, error) {
	f := sluice.ReplayFilter{Status: sluice.DeliveryDead}
	if s := values.Get("status"); s != "" {
		if s != sluice.DeliveryDead && s != sluice.DeliveryDelivered {
			return f, "", errBadRequest("Only dead or delivered deliveries can be replayed in bulk; queued ones are retried.")
		}
		f.Status = s
	}
	var err error
	if f.Since, err = formTime(values, "since"); err != nil {
		return f, "", err
	}
	if f.Until, err = formTime(values, "until"); err != nil {
		return f, "", err
	}
	from := "dead"
	if values.Get("from") == "endpoint" {
		from = "endpoint"
	}
	return f, from, nil
}

// backTo is the page a bulk replay returns to, with the count to flash
// when queued is not nil.
func backTo(id uuid.UUID, from string, queued *int64) string {
	q := url.Values{}
	if queued != nil {
		q.Set("queued", strconv.FormatInt(*queued, 10))
	}
	if from == "endpoint" {
		return withQuery("/endpoints/"+id.String(), q)
	}
	q.Set("endpoint_id", id.String())
	return withQuery("/dead", q)
}

// confirmReplay is GET /endpoints/{id}/replay: the confirmation step of
// "Replay all", saying how many deliveries it would queue.
func (d *Dashboard) confirmReplay(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	f, from, err := replayForm(r.URL.Query())
	if err != nil {
		return err
	}
	ctx, who := r.Context(), caller(r)
	ep, err := d.ctl.Endpoint(ctx, who, id)
	if err != nil {
		return err
	}
	n, err := d.ctl.CountReplayable(ctx, who, id, f)
	if err != nil {
		return err
	}
	v := web.ReplayConfirmView{Endpoint: ep, Status: f.Status, From: from, Count: n, Back: backTo(id, from, nil)}
	return d.render(w, r, http.StatusOK, web.ReplayConfirmPage(chrome(r, ""), v))
}

// replayEndpoint is POST /endpoints/{id}/replay: once confirmed
// (confirm=yes, sent by the confirmation page), replays the newest
// delivery of each event to the endpoint that matches the form's filter,
// then goes back to the page the action came from with the count to
// flash. Unconfirmed, it shows the confirmation page instead.
func (d *Dashboard) replayEndpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	f, from, err := replayForm(r.PostForm)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		if _, err := d.ctl.Endpoint(r.Context(), caller(r), id); err != nil {
			return err
		}
		q := url.Values{"status": {f.Status}, "from": {from}}
		for _, k := range []string{"since", "until"} {
			if v := r.PostForm.Get(k); v != "" {
				q.Set(k, v)
			}
		}
		return redirect(w, r, withQuery("/endpoints/"+id.String()+"/replay", q))
	}
	n, err := d.ctl.ReplayEndpoint(r.Context(), caller(r), id, f)
	if err != nil {
		return err
	}
	return redirect(w, r, backTo(id, from, &n))
}

// retryDelivery is POST /deliveries/{id}/retry: makes a queued delivery
// due now and shows it.
func (d *Dashboard) retryDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := d.ctl.RetryDelivery(r.Context(), caller(r), id); err != nil {
		return err
	}
	return redirect(w, r, "/deliveries/"+id.String()+"?retried=1")
}

// formTime reads an optional RFC 3339 time.
func formTime(values url.Values, field string) (*time.Time, error) {
	raw := values.Get(field)
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, errBadRequest(field + " must be an RFC 3339 time such as 2026-01-02T15:04:05Z.")
	}
	return &t, nil
}

// replayMarks finds the newest replay of each listed delivery that has one.
func (d *Dashboard) replayMarks(ctx context.Context, who control.Caller, ds []sluice.Delivery) (map[uuid.UUID]web.ReplayMark, error) {
	replays, err := d.ctl.NewestReplays(ctx, who, ds)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]web.ReplayMark, len(replays))
	for id, rp := range replays {
		out[id] = web.ReplayMark{ID: rp.ID, Status: rp.Status}
	}
	return out, nil
}
