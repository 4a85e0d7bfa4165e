package dashboard

import (
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// actor is who the session acts as in the audit log.
func (s session) actor() sluice.Actor {
	if s.member != nil {
		return sluice.Actor{Type: sluice.ActorMember, ID: s.member.ID.String(), Name: s.member.Email}
	}
	if s.consumer != nil {
		return sluice.Actor{Type: sluice.ActorPortal, ID: s.consumer.UID, Name: s.consumer.UID}
	}
	return sluice.Actor{Type: sluice.ActorAPIKey, ID: s.apiKeyID.String(), Name: s.apiKeyName}
}

// datetimeLocal is the layout of an <input type="datetime-local">, read as
// UTC (the dashboard's times are UTC).
const datetimeLocal = "2006-01-02T15:04"

// showAuditLog is GET /audit, a tenant's page: the audit log, filtered.
func (d *Dashboard) showAuditLog(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	v := web.AuditView{Action: q.Get("action"), ObjectID: q.Get("object_id"), ActorID: q.Get("actor_id"),
		Since: q.Get("since"), Until: q.Get("until")}
	f := sluice.AuditFilter{Action: v.Action, ObjectID: v.ObjectID, ActorID: v.ActorID}
	for _, t := range []struct {
		raw   string
		label string
		into  **time.Time
	}{{v.Since, "Since", &f.Since}, {v.Until, "Until", &f.Until}} {
		if t.raw == "" {
			continue
		}
		at, err := time.Parse(datetimeLocal, t.raw)
		if err != nil {
			v.Error = t.label + " must be a date and time."
			continue
		}
		*t.into = &at
	}
	status := http.StatusOK
	if v.Error != "" {
		status = http.StatusUnprocessableEntity
	} else {
		page, err := d.ctl.AuditLog(r.Context(), caller(r), f, p)
		if err != nil {
			return err
		}
		v.Entries, v.Older = page.Items, olderURL(r, page.Next)
	}
	return d.render(w, r, status, web.AuditPage(chrome(r, web.SectionAudit), v))
}
