package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/audit"
	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// auditActions names every change the API records in the audit log, by
// method and route under /v1. Posting events is not a change of the
// tenant's settings and is not recorded: an event is its own record, with
// its id, time and deliveries. TestAuditEveryChange walks openapi.yaml
// and fails on a mutating operation this table does not name.
var auditActions = map[string]audit.Action{}

// controlled names the changes the control layer authorises and audits
// itself; the route tables above shrink as operations move there.
var controlled = map[string]control.Action{
	"DELETE /endpoints/{id}":              control.EndpointDeleted,
	"POST /endpoints/{id}/replay":         control.EndpointReplayed,
	"POST /deliveries/{id}/replay":        control.DeliveryReplayed,
	"POST /deliveries/{id}/retry":         control.DeliveryRetried,
	"POST /api-keys":                      control.APIKeyCreated,
	"DELETE /api-keys/{id}":               control.APIKeyRevoked,
	"PUT /consumers/{uid}":                control.ConsumerUpdated, // or ConsumerCreated
	"DELETE /consumers/{uid}":             control.ConsumerDeleted,
	"POST /consumers/{uid}/portal":        control.PortalLinkCreated,
	"POST /consumers/{uid}/portal/revoke": control.PortalLinkRevoked,
	"PUT /event-types/{name}":             control.EventTypeUpdated, // or EventTypeCreated
	"DELETE /event-types/{name}":          control.EventTypeDeleted,
	"POST /members":                       control.MemberInvited,
	"PATCH /members/{id}":                 control.MemberUpdated,
	"DELETE /members/{id}":                control.MemberRemoved,
	"POST /endpoints":                     control.EndpointCreated,
	"PATCH /endpoints/{id}":               control.EndpointUpdated,
	"GET /endpoints/{id}/secret":          control.EndpointSecretRevealed,
	"POST /endpoints/{id}/secret/rotate":  control.EndpointSecretRotated,
	"POST /endpoints/{id}/test":           control.EndpointTested,
	"POST /endpoints/{id}/circuit/close":  control.EndpointCircuitClosed,
	"POST /subscriptions":                 control.SubscriptionCreated,
	"DELETE /subscriptions/{id}":          control.SubscriptionDeleted,
}

// guardedReads are the reads not every role may make, named like the
// actions above (control.ReadAuditLog, control.ReadMembers).
var guardedReads = map[string]string{
	"GET /audit-log":    string(control.ReadAuditLog),
	"GET /members":      string(control.ReadMembers),
	"GET /members/{id}": string(control.ReadMembers),
}

// authorized is the one place the API checks roles: it refuses, with 403,
// a request whose role (sluice.Role.Allows) does not allow its route's
// action (auditActions) or guarded read. An API key has every right
// (sluice.RoleOwner), so its requests pass without a look at their route;
// the check matters for a credential with a lesser role.
func authorized(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			role := roleFrom(r.Context())
			if role == sluice.RoleOwner {
				next.ServeHTTP(w, r)
				return
			}
			route := chi.NewRouteContext()
			if routes.Match(route, r.Method, strings.TrimPrefix(r.URL.Path, "/v1")) {
				key := r.Method + " " + route.RoutePattern()
				action, ok := string(auditActions[key]), true
				if action == "" {
					action, ok = guardedReads[key]
				}
				if ok && !role.Allows(action) {
					writeProblem(w, &Problem{Type: typeForbidden, Title: "Forbidden", Status: http.StatusForbidden,
						Detail: "the " + string(role) + " role may not do this (" + action + ")"})
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// audited is the /v1 middleware that records each change of auditActions
// in its own transaction (audit.Middleware).
func (a *API) audited(routes chi.Routes) func(http.Handler) http.Handler {
	return audit.Middleware(audit.Config{
		Actions: auditActions,
		Routes:  routes,
		Prefix:  "/v1",
		Tenant:  func(ctx context.Context) uuid.UUID { return tenantFrom(ctx).ID },
		Actor:   actorFrom,
		Store:   a.store,
		Failed:  a.writeError,
		Changed: audit.JSONFields,
	})
}

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
