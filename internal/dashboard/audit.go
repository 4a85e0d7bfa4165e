package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/audit"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/web"
)

// auditActions names every change the dashboard and the portal record in
// the audit log, by method and route, with the same actions as the API's.
// TestAuditEveryDashboardForm fails on a POST route this table does not
// name.
var auditActions = map[string]audit.Action{}

// controlled names the changes the control layer authorises and audits
// itself; the route tables above shrink as operations move there.
var controlled = map[string]control.Action{
	"POST /endpoints/{id}/delete":         control.EndpointDeleted,
	"POST /endpoints/{id}/replay":         control.EndpointReplayed,
	"POST /deliveries/{id}/replay":        control.DeliveryReplayed,
	"POST /deliveries/{id}/retry":         control.DeliveryRetried,
	"POST /api-keys":                      control.APIKeyCreated,
	"POST /api-keys/{id}/revoke":          control.APIKeyRevoked,
	"POST /consumers":                     control.ConsumerCreated,
	"POST /consumers/{uid}/edit":          control.ConsumerUpdated,
	"POST /consumers/{uid}/delete":        control.ConsumerDeleted,
	"POST /consumers/{uid}/portal":        control.PortalLinkCreated,
	"POST /consumers/{uid}/portal/revoke": control.PortalLinkRevoked,
	"POST /event-types":                   control.EventTypeCreated,
	"POST /event-types/{name}/edit":       control.EventTypeUpdated,
	"POST /event-types/{name}/delete":     control.EventTypeDeleted,
	"POST /members":                       control.MemberInvited,
	"POST /members/{id}/edit":             control.MemberUpdated,
	"POST /members/{id}/remove":           control.MemberRemoved,
	"POST /endpoints":                     control.EndpointCreated,
	"POST /endpoints/{id}/edit":           control.EndpointUpdated,
	"POST /endpoints/{id}/disable":        control.EndpointUpdated,
	"POST /endpoints/{id}/secret":         control.EndpointSecretRevealed,
	"POST /endpoints/{id}/secret/rotate":  control.EndpointSecretRotated,
	"POST /endpoints/{id}/test":           control.EndpointTested,
	"POST /endpoints/{id}/circuit/close":  control.EndpointCircuitClosed,
}

// guardedPages are the pages not every role may see, named by what they
// show (control.ReadAuditLog, control.ReadMembers) or the action they
// lead to.
var guardedPages = map[string]string{
	"GET /audit":               string(control.ReadAuditLog),
	"GET /members":             string(control.ReadMembers),
	"GET /members/{id}/remove": string(control.MemberRemoved),
}

// authorized is the one place the dashboard checks roles: it refuses, with
// a 403 page, a request whose session's role (sluice.Role.Allows) does not
// allow the action its route performs (auditActions) or the page it shows
// (guardedPages). It runs after requireSession and requireCSRF, so a
// forged form is refused for its token first.
func (d *Dashboard) authorized(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, _ := sessionFromContext(r.Context())
			role := s.role()
			if role == sluice.RoleOwner {
				next.ServeHTTP(w, r)
				return
			}
			route := chi.NewRouteContext()
			if routes.Match(route, r.Method, r.URL.Path) {
				key := r.Method + " " + route.RoutePattern()
				action, ok := string(auditActions[key]), true
				if action == "" {
					action, ok = guardedPages[key]
				}
				if ok && !role.Allows(action) {
					d.writeError(w, r, errRole(role))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// audited records each change of auditActions in its own transaction
// (audit.Middleware), as the session's actor: the API key a tenant's
// session signed in with, the member who signed in, or the consumer of a
// portal session.
func (d *Dashboard) audited(routes chi.Routes) func(http.Handler) http.Handler {
	return audit.Middleware(audit.Config{
		Actions: auditActions,
		Routes:  routes,
		Tenant: func(ctx context.Context) uuid.UUID {
			s, _ := sessionFromContext(ctx)
			return s.tenant.ID
		},
		Actor: func(ctx context.Context) sluice.Actor {
			s, _ := sessionFromContext(ctx)
			return s.actor()
		},
		Store:   d.store,
		Failed:  d.writeError,
		Changed: audit.FormFields("/edit", csrfField),
	})
}

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
