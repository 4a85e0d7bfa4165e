package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// eventWithDeliveries is GET /v1/events/{id}: the event and its fan-out.
type eventWithDeliveries struct {
	sluice.Event
	Deliveries []sluice.Delivery `json:"deliveries"`
}

func (a *API) createEvent(w http.ResponseWriter, r *http.Request) error {
	limit := int64(a.cfg.MaxPayload + eventBodyRoom)
	release, ok := a.admitLarge(w, r, limit, "events")
	if !ok {
		return nil
	}
	defer release()
	var in eventInput
	if err := decodeJSON(w, r, &in, limit); err != nil {
		return err
	}
	v := &sluice.ValidationError{}
	ev, err := in.toNewEvent("", a.cfg.MaxPayload, v)
	if err != nil {
		return err
	}
	ev.IdempotencyKey = r.Header.Get("Idempotency-Key")
	if len(ev.IdempotencyKey) > maxIdempotencyKey {
		v.Add("Idempotency-Key", "must be at most %d characters", maxIdempotencyKey)
	}
	if err := v.Err(); err != nil {
		return err
	}
	tenantID := tenantFrom(r.Context()).ID
	if err := a.checkEvents(w, r, tenantID, []sluice.NewEvent{ev}, noPrefix, v); err != nil {
		return err
	}
	if err := v.Err(); err != nil {
		return err
	}
	out, created, err := a.storeEvent(r.Context(), tenantID, ev)
	if err != nil {
		return err
	}
	if created {
		metrics.EventsIngested.Inc()
	} else {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

func (a *API) createEventBatch(w http.ResponseWriter, r *http.Request) error {
	// A key on a batch would promise what no lookup backs (a repeat would
	// make a second set of events): it is refused, never ignored.
	if _, keyed := r.Header["Idempotency-Key"]; keyed {
		return badRequest("Idempotency-Key is not accepted on a batch: a repeated batch would not be recognised; " +
			"post events that must be idempotent one at a time to POST /v1/events with a key each")
	}
	release, ok := a.admitLarge(w, r, maxBatchBody, "batches")
	if !ok {
		return nil
	}
	defer release()
	in, err := decodeBatch(w, r)
	if err != nil {
		return err
	}
	a.chargeBatch(w, r, len(in.Events))
	v := &sluice.ValidationError{}
	switch n := len(in.Events); {
	case n == 0:
		v.Add("events", "must hold at least one event")
	case n > maxBatchEvents:
		v.Add("events", "must hold at most %d events, not %d", maxBatchEvents, n)
	}
	evs := make([]sluice.NewEvent, len(in.Events))
	for i, e := range in.Events {
		var err error
		if evs[i], err = e.toNewEvent(fmt.Sprintf("events[%d].", i), a.cfg.MaxPayload, v); err != nil {
			return err
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	in = batchInput{} // evs holds what is still needed
	tenantID := tenantFrom(r.Context()).ID
	if err := a.checkEvents(w, r, tenantID, evs, batchPrefix, v); err != nil {
		return err
	}
	if err := v.Err(); err != nil {
		return err
	}
	out, err := a.ingest.SubmitBatch(r.Context(), tenantID, evs)
	if err != nil {
		return err
	}
	evs = nil
	metrics.EventsIngested.Add(float64(len(out)))
	writeEventList(w, http.StatusAccepted, out)
	return nil
}

func (a *API) listEvents(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	q := r.URL.Query()
	f := sluice.EventFilter{
		Type: queryValue(q, "type"), Filter: queryValue(q, "filter"),
		Since: queryTime(q, "since", v), Until: queryTime(q, "until", v),
	}
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.Events(r.Context(), caller(r), f, p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

func (a *API) getEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "event")
	if err != nil {
		return err
	}
	ev, deliveries, err := a.ctl.Event(r.Context(), caller(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventWithDeliveries{Event: ev, Deliveries: deliveries})
	return nil
}

func noPrefix(int) string { return "" }

func batchPrefix(i int) string { return fmt.Sprintf("events[%d].", i) }

// storeEvent commits one event: through the group-commit batcher, or on its
// own when it carries an Idempotency-Key (which needs its own lookup).
func (a *API) storeEvent(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, bool, error) {
	if ev.IdempotencyKey != "" {
		return a.ingest.SubmitIdempotent(ctx, tenantID, ev)
	}
	// The commit is another goroutine's: its wait counts towards this
	// request's bound all the same.
	done := dbwait.Wait(ctx)
	out, err := a.ingest.Submit(ctx, tenantID, ev)
	done()
	return out, err == nil, err
}
