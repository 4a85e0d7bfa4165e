package sluice

import (
	"strings"
	"time"

	"github.com/google/uuid"
)

// Role is what a tenant's member may do.
type Role string

// The roles.
const (
	RoleOwner  Role = "owner"  // everything
	RoleAdmin  Role = "admin"  // everything but members
	RoleViewer Role = "viewer" // reads only: no secrets, no changes
)

// Roles are the roles, most rights first.
var Roles = []Role{RoleOwner, RoleAdmin, RoleViewer}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleAdmin || r == RoleViewer }

// Allows reports whether r may perform action: a change the audit log
// records ("endpoint.updated", "endpoint.secret_revealed") or a guarded
// read ("audit_log.read", "member.read"), as control.Action names them.
// An owner may do everything; an admin everything but the member.*
// actions; a viewer none of them: it reads what no action names, which
// holds no secret (reading one is an action).
func (r Role) Allows(action string) bool {
	switch r {
	case RoleOwner:
		return true
	case RoleAdmin:
		return !strings.HasPrefix(action, "member.")
	default:
		return false
	}
}

// ReadOnly reports whether r may perform no action at all (Allows is
// false for every one): its pages show no forms.
func (r Role) ReadOnly() bool { return r != RoleOwner && r != RoleAdmin }

// Statuses of a member.
const (
	MemberInvited = "invited" // has not set a password yet
	MemberActive  = "active"
)

// Member is one of a tenant's team members, as the API shows it.
type Member struct {
	ID        uuid.UUID `json:"id"`
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}
