package httpapi

import (
	"net/http"
	"net/url"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// listAuditLog is GET /v1/audit-log: the tenant's changes, newest first.
func (a *API) listAuditLog(w http.ResponseWriter, r *http.Request) error {
	v := &sluice.ValidationError{}
	p := pageParams(r, v)
	q := r.URL.Query()
	f := sluice.AuditFilter{Action: q.Get("action"), ObjectID: q.Get("object_id"), ActorID: q.Get("actor_id")}
	f.Since = timeField(queryValue(q, "since"), "since", v)
	f.Until = timeField(queryValue(q, "until"), "until", v)
	if err := v.Err(); err != nil {
		return err
	}
	page, err := a.ctl.AuditLog(r.Context(), caller(r), f, p)
	if err != nil {
		return err
	}
	writePage(w, page)
	return nil
}

// queryValue is a query parameter, or nil when it is absent or empty.
func queryValue(q url.Values, name string) *string {
	if v := q.Get(name); v != "" {
		return &v
	}
	return nil
}
