package control

import (
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Caller is who asks for an operation: the tenant, who acts for it, in
// which role, from where, and, for a portal session, the one consumer
// whose objects it may see.
type Caller struct {
	Tenant uuid.UUID
	// Consumer is the uid a portal session is scoped to; nil for the
	// tenant's own callers (API keys, members, tenant sessions).
	Consumer *string
	// Actor is recorded in the audit log as who made a change.
	Actor sluice.Actor
	// Role is what the caller may do; an API key is sluice.RoleOwner.
	Role sluice.Role
	// ReadOnly is a session that may change nothing whatever its role
	// (a read-only portal link).
	ReadOnly bool
	// SourceIP is the client's address, for the audit log; "" when
	// unknown.
	SourceIP string
}

// may refuses, with a *sluice.ForbiddenError, a caller whose role does
// not allow act.
func (who Caller) may(act Action) error {
	if who.ReadOnly || !who.Role.Allows(string(act)) {
		return &sluice.ForbiddenError{Role: string(who.Role), Action: string(act), ReadOnly: who.ReadOnly}
	}
	return nil
}

// Allows reports whether the caller may perform act, for a door that
// shows or hides the form that leads to it.
func (who Caller) Allows(act Action) bool { return who.may(act) == nil }

// portal reports whether the caller is scoped to one consumer.
func (who Caller) portal() bool { return who.Consumer != nil }

// ownsEndpoint reports whether an endpoint is inside the caller's scope.
func (who Caller) ownsEndpoint(ep sluice.Endpoint) bool {
	return who.Consumer == nil || (ep.Consumer != nil && *ep.Consumer == *who.Consumer)
}

// seesEvent reports whether an event is inside the caller's scope.
func (who Caller) seesEvent(ev sluice.Event) bool {
	return who.Consumer == nil || ev.Broadcast || (ev.Consumer != nil && *ev.Consumer == *who.Consumer)
}

func (who Caller) sourceIP() *string {
	if who.SourceIP == "" {
		return nil
	}
	ip := who.SourceIP
	return &ip
}
