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
	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// auditActions names every change the API records in the audit log, by
// method and route under /v1. Posting events is not a change of the
// tenant's settings and is not recorded: an event is its own record, with
// its id, time and deliveries. TestAuditEveryChange walks openapi.yaml
// and fails on a mutating operation this table does not name.
var auditActions = map[string]audit.Action{
	"POST /api-keys":                      "api_key.created",
	"DELETE /api-keys/{id}":               "api_key.revoked",
	"PUT /consumers/{uid}":                "consumer.put",
	"DELETE /consumers/{uid}":             "consumer.deleted",
	"POST /consumers/{uid}/portal":        "portal_link.created",
	"POST /consumers/{uid}/portal/revoke": "portal_link.revoked",
	"PUT /event-types/{name}":             "event_type.put",
	"DELETE /event-types/{name}":          "event_type.deleted",
	"POST /endpoints/{id}/replay":         "endpoint.replayed",
	"POST /deliveries/{id}/replay":        "delivery.replayed",
	"POST /deliveries/{id}/retry":         "delivery.retried",
	"POST /members":                       "member.invited",
	"PATCH /members/{id}":                 "member.updated",
	"DELETE /members/{id}":                "member.removed",
}

// controlled names the changes the control layer authorises and audits
// itself; the route tables above shrink as operations move there.
var controlled = map[string]control.Action{
	"POST /endpoints":                    control.EndpointCreated,
	"PATCH /endpoints/{id}":              control.EndpointUpdated,
	"DELETE /endpoints/{id}":             control.EndpointDeleted,
	"GET /endpoints/{id}/secret":         control.EndpointSecretRevealed,
	"POST /endpoints/{id}/secret/rotate": control.EndpointSecretRotated,
	"POST /endpoints/{id}/test":          control.EndpointTested,
	"POST /endpoints/{id}/circuit/close": control.EndpointCircuitClosed,
	"POST /subscriptions":                control.SubscriptionCreated,
	"DELETE /subscriptions/{id}":         control.SubscriptionDeleted,
}

// guardedReads are the reads not every role may make, named like the
// actions above (member.ReadAuditLog, member.ReadMembers).
var guardedReads = map[string]string{
	"GET /audit-log":    member.ReadAuditLog,
	"GET /members":      member.ReadMembers,
	"GET /members/{id}": member.ReadMembers,
}

// authorized is the one place the API checks roles: it refuses, with 403,
// a request whose role (member.Role.Allows) does not allow its route's
// action (auditActions) or guarded read. An API key has every right
// (member.Owner), so its requests pass without a look at their route;
// the check matters for a credential with a lesser role.
func authorized(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			role := roleFrom(r.Context())
			if role == member.Owner {
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
	page, err := a.store.AuditLog(r.Context(), tenantFrom(r.Context()).ID, f, p)
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
