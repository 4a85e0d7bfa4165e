package web

import (
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// SectionMembers is the members page's nav section.
const SectionMembers = "members"

// MembersView is the members page: the tenant's members, the form that
// invites one and, per member, the form that changes its role.
type MembersView struct {
	Members []sluice.Member
	Older   string
	Current uuid.UUID // the member signed in, if a member is
	Flash   string
	// Error says why the invite form was refused; Email and Role refill
	// it.
	Error string
	Email string
	Role  sluice.Role
}

// RemoveMemberView is the confirmation step of removing a member.
type RemoveMemberView struct {
	Member  sluice.Member
	Current bool // the member signed in: removing it signs out
}

// LoginView is the sign-in page.
type LoginView struct {
	Error  string // why the last try failed
	Notice string // a password just set, a reset link sent
	Next   string // where to go once signed in
	Email  string // refills the form
}

// PasswordView is the page an emailed link opens: the form that sets the
// member's password.
type PasswordView struct {
	Token  string
	Email  string
	Invite bool // an invitation's link, not a reset's
	Error  string
}

// ForgotView is the form that emails a reset link.
type ForgotView struct {
	Sent bool
	// Logged: the link was written to the server's log, not emailed
	// (SLUICE_DEV_MAIL_LOG).
	Logged bool
	Error  string
}

// MinPasswordLength is what the password form asks for.
const MinPasswordLength = member.MinPasswordLength

func memberPath(id uuid.UUID) string       { return "/members/" + id.String() }
func editMemberPath(id uuid.UUID) string   { return memberPath(id) + "/edit" }
func removeMemberPath(id uuid.UUID) string { return memberPath(id) + "/remove" }

// memberRoles are the roles the forms offer, most rights first.
var memberRoles = func() []string {
	out := make([]string, len(sluice.Roles))
	for i, r := range sluice.Roles {
		out[i] = string(r)
	}
	return out
}()
