package httpapi

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/ingest"
	"github.com/sluice-dev/sluice/internal/store"
)

// StartIngest returns an Ingester on st, as the app wires one for the API:
// started, and stopped when the test ends.
func StartIngest(t testing.TB, st *store.Store, nudger *dispatch.Nudger) *ingest.Ingester {
	t.Helper()
	in, err := ingest.New(st, ingest.Config{Nudger: nudger})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Stop)
	return in
}

// AuditActions is what each change the door offers records in the audit
// log, by method and route: the test that walks the door's routes holds
// the door to it, and the test that performs them to the log.
var AuditActions = map[string]control.Action{
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
	"POST /endpoints/{id}/verify":         control.EndpointVerifyAsked,
	"POST /subscriptions":                 control.SubscriptionCreated,
	"DELETE /subscriptions/{id}":          control.SubscriptionDeleted,
	"PATCH /tenant":                       control.TenantRetentionUpdated,
}

// PollWaiting is how many poll reads of a are waiting.
func PollWaiting(a *API) int { return a.poll.Waiting() }

// PollLookUps is how many times a's poll reads looked an endpoint up in
// the database.
func PollLookUps(a *API) int64 { return a.poll.LookUps() }
