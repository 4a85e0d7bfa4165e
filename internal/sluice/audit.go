package sluice

import (
	"time"

	"github.com/google/uuid"
)

// The kinds of actor an audit entry names.
const (
	ActorAPIKey = "api_key" // a request made with an API key (also the dashboard signed in with one)
	ActorMember = "member"  // a team member signed in to the dashboard
	ActorPortal = "portal"  // a consumer's portal session
)

// Actor is who made a change: an API key, a member or a portal session,
// by id and name (a key's name, a member's email, a consumer's uid).
type Actor struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Name string `json:"name"`
}

// AuditEntry is one change, recorded in the transaction that made it.
// Changed names the fields an update set; never their values.
type AuditEntry struct {
	ID       uuid.UUID `json:"id"`
	At       time.Time `json:"at"`
	Actor    Actor     `json:"actor"`
	Action   string    `json:"action"`
	ObjectID *string   `json:"object_id"`
	SourceIP *string   `json:"source_ip"`
	Changed  []string  `json:"changed"`
}

// AuditFilter narrows a read of the audit log; zero fields match all.
type AuditFilter struct {
	Action   string
	ObjectID string
	ActorID  string
	Since    *time.Time
	Until    *time.Time
}
