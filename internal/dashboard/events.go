package dashboard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// listEvents is GET /events: the scope's events, newest first, filtered
// by type (one, or "prefix.*"), creation time and a payload filter.
func (d *Dashboard) listEvents(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	v := web.EventsView{Type: strings.TrimSpace(q.Get("type")), Filter: strings.TrimSpace(q.Get("filter"))}
	var f sluice.EventFilter
	if v.Type != "" {
		f.Type = &v.Type
	}
	if v.Filter != "" {
		f.Filter = &v.Filter
	}
	if f.Since, v.Since, err = filterTime(q.Get("since")); err != nil {
		return err
	}
	if f.Until, v.Until, err = filterTime(q.Get("until")); err != nil {
		return err
	}
	page, err := d.ctl.Events(r.Context(), caller(r), f, p)
	if err != nil {
		return err
	}
	v.Events, v.Older = page.Items, olderURL(r, page.Next)
	if v.FanOut, err = d.ctl.FanOut(r.Context(), caller(r), page.Items); err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, web.EventsPage(chrome(r, web.SectionEvents), v))
}

// showEvent is GET /events/{id}: an event, its payload and its fan-out.
func (d *Dashboard) showEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	ctx, who := r.Context(), caller(r)
	ev, deliveries, err := d.ctl.Event(ctx, who, id)
	if err != nil {
		return err
	}
	v := web.EventView{Event: ev, Payload: prettyJSON(ev.Payload), Deliveries: deliveries}
	eps, err := d.ctl.EndpointsByID(ctx, who, endpointIDs(deliveries), nil)
	if err != nil {
		return err
	}
	v.EndpointsByID, v.Next = eps, nextAttempts(deliveries, eps, d.now())
	if v.Replays, err = d.replayMarks(ctx, who, deliveries); err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, web.EventPage(chrome(r, web.SectionEvents), v))
}

// prettyJSON indents a JSON document, or returns it as is if it is not one.
func prettyJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
