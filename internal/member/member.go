// Package member is a tenant's team members: who they are (Member), what
// each role may do (Role.Allows, the one rule the API and the dashboard
// both enforce), and how their passwords and the one-time links that set
// them are kept (password.go, token.go).
package member

import (
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Role is what a member may do.
type Role string

// The roles.
const (
	Owner  Role = "owner"  // everything
	Admin  Role = "admin"  // everything but members
	Viewer Role = "viewer" // reads only: no secrets, no changes
)

// Roles are the roles, most rights first.
var Roles = []Role{Owner, Admin, Viewer}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r == Owner || r == Admin || r == Viewer }

// Reads that not every role may make, named like the actions of the audit
// tables (internal/httpapi/audit.go, internal/dashboard/audit.go), so that
// one rule (Allows) answers for both.
const (
	ReadAuditLog = "audit_log.read" // GET /v1/audit-log, the dashboard's /audit
	ReadMembers  = "member.read"    // GET /v1/members, the dashboard's /members
)

// Allows reports whether r may perform action: an action of the audit
// tables ("endpoint.updated", "endpoint.secret_revealed") or one of the
// guarded reads above. An owner may do everything; an admin everything but
// the member.* actions; a viewer none of them: it reads what no action
// names, which holds no secret (reading one is an action).
func (r Role) Allows(action string) bool {
	switch r {
	case Owner:
		return true
	case Admin:
		return !strings.HasPrefix(action, "member.")
	default:
		return false
	}
}

// ReadOnly reports whether r may perform no action at all (Allows is
// false for every one): its pages show no forms.
func (r Role) ReadOnly() bool { return r != Owner && r != Admin }

// Statuses of a member.
const (
	StatusInvited = "invited" // has not set a password yet
	StatusActive  = "active"
)

// Member is one of a tenant's team members, as the API shows it.
type Member struct {
	ID        uuid.UUID `json:"id"`
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// MaxEmailLength bounds an email address, in bytes (RFC 5321's path).
const MaxEmailLength = 254

// NewParams are what an invitation says: who, and in what role.
type NewParams struct {
	Email string
	Role  Role
}

// Validate checks p: a plain email address (no display name) of at most
// MaxEmailLength bytes, and a known role.
func (p NewParams) Validate() error {
	v := &sluice.ValidationError{}
	checkEmail(v, p.Email)
	checkRole(v, p.Role)
	return v.Err()
}

// checkEmail adds email's fault, if any, to v.
func checkEmail(v *sluice.ValidationError, email string) {
	switch {
	case strings.TrimSpace(email) == "":
		v.Add("email", "is required")
	case len(email) > MaxEmailLength:
		v.Add("email", "must be at most %d bytes", MaxEmailLength)
	case !utf8.ValidString(email) || !plainAddress(email):
		v.Add("email", "must be an email address such as ann@example.com")
	}
}

// plainAddress reports whether s is a bare address, "ann@example.com".
func plainAddress(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Name == "" && a.Address == s && strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".")
}

// checkRole adds role's fault, if any, to v.
func checkRole(v *sluice.ValidationError, role Role) {
	switch {
	case role == "":
		v.Add("role", "is required")
	case !role.Valid():
		v.Add("role", "must be owner, admin or viewer")
	}
}

// ValidateRole checks a role alone, as a change of role gives it.
func ValidateRole(role Role) error {
	v := &sluice.ValidationError{}
	checkRole(v, role)
	return v.Err()
}

// NormalizeEmail is the form an email is stored and compared in: trimmed;
// comparisons are case-insensitive (the database compares lower(email)).
func NormalizeEmail(email string) string { return strings.TrimSpace(email) }
