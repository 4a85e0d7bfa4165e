package dashboard

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/audit"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// auditActions names every change the dashboard and the portal record in
// the audit log, by method and route, with the same actions as the API's.
// TestAuditEveryDashboardForm fails on a POST route this table does not
// name.
var auditActions = map[string]audit.Action{
	"POST /endpoints/{id}/replay":        "endpoint.replayed",
	"POST /deliveries/{id}/replay":       "delivery.replayed",
	"POST /deliveries/{id}/retry":        "delivery.retried",
	"POST /endpoints":                    "endpoint.created",
	"POST /endpoints/{id}/edit":          "endpoint.updated",
	"POST /endpoints/{id}/disable":       "endpoint.updated",
	"POST /endpoints/{id}/delete":        "endpoint.deleted",
	"POST /endpoints/{id}/secret":        "endpoint.secret_revealed",
	"POST /endpoints/{id}/secret/rotate": "endpoint.secret_rotated",
	"POST /endpoints/{id}/test":          "endpoint.tested",
	"POST /endpoints/{id}/circuit/close": "endpoint.circuit_closed",
	"POST /api-keys":                     "api_key.created",
	"POST /api-keys/{id}/revoke":         "api_key.revoked",
}

// audited records each change of auditActions in its own transaction
// (audit.Middleware), as the session's actor: the API key a tenant's
// session signed in with, or the consumer of a portal session.
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
	if s.consumer != nil {
		return sluice.Actor{Type: sluice.ActorPortal, ID: s.consumer.UID, Name: s.consumer.UID}
	}
	return sluice.Actor{Type: sluice.ActorAPIKey, ID: s.apiKeyID.String(), Name: s.apiKeyName}
}
