package dashboard

import (
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/control"
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
		v.ObjectLinks = objectLinks(page.Items)
	}
	return d.render(w, r, status, web.AuditPage(chrome(r, web.SectionAudit), v))
}

// objectPages are the pages of the objects the audit log's actions name,
// by action: an endpoint's, a delivery's, a consumer's (its portal links
// are on it), an event type's. Deletions, and objects without a page of
// their own (API keys, members, subscriptions), have none.
var objectPages = map[control.Action]func(id string) string{
	control.EndpointCreated:        endpointPage,
	control.EndpointUpdated:        endpointPage,
	control.EndpointSecretRevealed: endpointPage,
	control.EndpointSecretRotated:  endpointPage,
	control.EndpointTested:         endpointPage,
	control.EndpointReplayed:       endpointPage,
	control.EndpointCircuitClosed:  endpointPage,
	control.EndpointThrottleLifted: endpointPage,
	control.EndpointVerifyAsked:    endpointPage,
	control.DeliveryReplayed:       func(id string) string { return "/deliveries/" + url.PathEscape(id) },
	control.DeliveryRetried:        func(id string) string { return "/deliveries/" + url.PathEscape(id) },
	control.ConsumerCreated:        consumerPage,
	control.ConsumerUpdated:        consumerPage,
	control.PortalLinkCreated:      consumerPage,
	control.PortalLinkRevoked:      consumerPage,
	control.EventTypeCreated:       func(id string) string { return "/event-types/" + url.PathEscape(id) },
	control.EventTypeUpdated:       func(id string) string { return "/event-types/" + url.PathEscape(id) },
}

func endpointPage(id string) string  { return "/endpoints/" + url.PathEscape(id) }
func consumerPage(uid string) string { return "/consumers/" + url.PathEscape(uid) }

// objectLinks are the pages of entries' objects (objectPages), by entry id.
func objectLinks(entries []sluice.AuditEntry) map[uuid.UUID]string {
	out := make(map[uuid.UUID]string, len(entries))
	for _, e := range entries {
		if page, ok := objectPages[control.Action(e.Action)]; ok && e.ObjectID != nil {
			out[e.ID] = page(*e.ObjectID)
		}
	}
	return out
}
