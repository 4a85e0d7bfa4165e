package control

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/member"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Members: a tenant's team, who sign in to the dashboard with an email
// and a password, each in a role (sluice.Role.Allows). Inviting one, and
// asking for a reset, queue the email of a one-time link that sets the
// password (notify.MemberMailWorker, member.NewToken); the link's token
// is checked and used here. Members are the tenant's own: a portal
// caller sees none of them.

// MemberMail is how the links that set a member's password reach it.
type MemberMail int

// The ways of MemberMail.
const (
	// MemberMailSMTP emails them over SLUICE_SMTP_URL.
	MemberMailSMTP MemberMail = iota
	// MemberMailLog writes them to the server's log instead
	// (SLUICE_DEV_MAIL_LOG without SLUICE_SMTP_URL, as `make run` sets):
	// a developer's machine, where whoever invites can read the log.
	MemberMailLog
	// MemberMailNone has no way to send them: inviting a member and
	// asking for a reset are sluice.ErrMailNotConfigured.
	MemberMailNone
)

// MemberMailOf is the MemberMail of a server with SLUICE_SMTP_URL
// smtpURL and SLUICE_DEV_MAIL_LOG devLog.
func MemberMailOf(smtpURL string, devLog bool) MemberMail {
	switch {
	case smtpURL != "":
		return MemberMailSMTP
	case devLog:
		return MemberMailLog
	default:
		return MemberMailNone
	}
}

// MemberLinksLogged reports whether members' links are written to the
// server's log rather than emailed (MemberMailLog), for the doors to say
// where the link went.
func (c *Control) MemberLinksLogged() bool { return c.cfg.MemberMail == MemberMailLog }

// MaxEmailLength bounds an email address, in bytes (RFC 5321's path).
const MaxEmailLength = 254

// MemberInput is what an invitation says: who, and in what role.
type MemberInput struct {
	Email string
	Role  sluice.Role
}

// normalizeEmail is the form an email is stored and compared in: trimmed;
// comparisons are case-insensitive (the database compares lower(email)).
func normalizeEmail(email string) string { return strings.TrimSpace(email) }

// checkEmail adds email's fault, if any, to v.
func checkEmail(v *sluice.ValidationError, email string) {
	switch {
	case email == "":
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
func checkRole(v *sluice.ValidationError, role sluice.Role) {
	switch {
	case role == "":
		v.Add("role", "is required")
	case !role.Valid():
		v.Add("role", "must be owner, admin or viewer")
	}
}

// InviteMember adds a member to the tenant and queues, in the same
// transaction, the job that emails its invitation. An email any member
// has, in any tenant and any case, is sluice.ErrConflict: one sign-in
// form serves them all. A server that cannot send the invitation
// (MemberMailNone) invites no one: sluice.ErrMailNotConfigured.
func (c *Control) InviteMember(ctx context.Context, who Caller, in MemberInput) (sluice.Member, error) {
	in.Email = normalizeEmail(in.Email)
	v := &sluice.ValidationError{}
	checkEmail(v, in.Email)
	checkRole(v, in.Role)
	if err := v.Err(); err != nil {
		return sluice.Member{}, err
	}
	var m sluice.Member
	err := c.change(ctx, who, MemberInvited, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		if c.cfg.MemberMail == MemberMailNone {
			return sluice.ErrMailNotConfigured
		}
		var err error
		if m, err = c.store.AddMember(ctx, who.Tenant, in.Email, in.Role); err != nil {
			return fmt.Errorf("invite member: %w", err)
		}
		e.ObjectID = object(m.ID)
		return c.mail(ctx, m.ID, member.PurposeInvite)
	})
	return m, err
}

// mail queues the email of a member's link, in the transaction of ctx's
// change if there is one.
func (c *Control) mail(ctx context.Context, memberID uuid.UUID, purpose string) error {
	err := c.store.InTx(ctx, func(tx store.Tx) error {
		return c.nudger.MemberMail(ctx, tx, memberID, purpose)
	})
	if err != nil {
		return fmt.Errorf("queue member mail: %w", err)
	}
	return nil
}

// Members is a page of the tenant's members, newest first: a guarded read
// (ReadMembers).
func (c *Control) Members(ctx context.Context, who Caller, p sluice.PageParams) (sluice.Page[sluice.Member], error) {
	if err := who.may(ReadMembers); err != nil {
		return sluice.Page[sluice.Member]{}, err
	}
	if who.portal() {
		return sluice.Page[sluice.Member]{}, nil
	}
	return c.store.ListMembers(ctx, who.Tenant, p)
}

// Member is one of the tenant's members: a guarded read (ReadMembers).
func (c *Control) Member(ctx context.Context, who Caller, id uuid.UUID) (sluice.Member, error) {
	if err := who.may(ReadMembers); err != nil {
		return sluice.Member{}, err
	}
	if who.portal() {
		return sluice.Member{}, sluice.ErrNotFound
	}
	return c.store.GetMember(ctx, who.Tenant, id)
}

// SetMemberRole changes a member's role, which its dashboard sessions
// have from their next request on.
func (c *Control) SetMemberRole(ctx context.Context, who Caller, id uuid.UUID, role sluice.Role) (sluice.Member, error) {
	v := &sluice.ValidationError{}
	checkRole(v, role)
	if err := v.Err(); err != nil {
		return sluice.Member{}, err
	}
	var m sluice.Member
	err := c.change(ctx, who, MemberUpdated, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		old, err := c.store.GetMember(ctx, who.Tenant, id)
		if err != nil {
			return err
		}
		if m, err = c.store.SetMemberRole(ctx, who.Tenant, id, role); err != nil {
			return err
		}
		e.ObjectID = object(id)
		if old.Role != m.Role {
			e.Changed = []string{"role"}
		}
		return nil
	})
	return m, err
}

// RemoveMember deletes one of the tenant's members, and with it its
// dashboard sessions and unused links.
func (c *Control) RemoveMember(ctx context.Context, who Caller, id uuid.UUID) error {
	return c.change(ctx, who, MemberRemoved, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		e.ObjectID = object(id)
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteMember, dbq.DeleteMemberParams{TenantID: who.Tenant, ID: id}); err != nil {
			return fmt.Errorf("delete member: %w", err)
		}
		return nil
	})
}

// PasswordLinkMember is the member whose password an emailed link's
// token sets, with the link's purpose (member.PurposeInvite or
// member.PurposeReset).
type PasswordLinkMember struct {
	ID      uuid.UUID
	Email   string
	Purpose string
}

// PasswordLink is the member whose password token sets, while the token
// is well formed, unused and unexpired; otherwise sluice.ErrNotFound.
// Looking does not use the token.
func (c *Control) PasswordLink(ctx context.Context, token string) (PasswordLinkMember, error) {
	if !member.WellFormedToken(token) {
		return PasswordLinkMember{}, sluice.ErrNotFound
	}
	row, err := store.Read(ctx, c.store, (*dbq.Queries).MemberByToken, dbq.MemberByTokenParams{TokenHash: member.TokenHash(token), Now: c.now()})
	if err != nil {
		return PasswordLinkMember{}, fmt.Errorf("read password link: %w", err)
	}
	return PasswordLinkMember{ID: row.ID, Email: row.Email, Purpose: row.Purpose}, nil
}

// SetPassword uses an emailed link's token to set its member's password:
// once, within member.TokenTTL. It makes every other link of the member
// useless and ends its dashboard sessions. A token that does not work
// (any more) is sluice.ErrNotFound, and is used up either way.
func (c *Control) SetPassword(ctx context.Context, token, password string) (sluice.Member, error) {
	if err := member.ValidatePassword(password); err != nil {
		return sluice.Member{}, err //nolint:wrapcheck // the caller's fault, said as is
	}
	if !member.WellFormedToken(token) {
		return sluice.Member{}, sluice.ErrNotFound
	}
	return c.store.SetMemberPassword(ctx, member.TokenHash(token), member.HashPassword(password), c.now())
}

// RequestPasswordReset queues the email of a reset link to the member
// with email, if there is one; it reports nothing either way, as the form
// that asks for it answers the same either way. A server that cannot send
// the link (MemberMailNone) says so for every email alike:
// sluice.ErrMailNotConfigured.
func (c *Control) RequestPasswordReset(ctx context.Context, email string) error {
	if c.cfg.MemberMail == MemberMailNone {
		return sluice.ErrMailNotConfigured
	}
	cred, err := c.store.MemberByEmail(ctx, normalizeEmail(email))
	if err != nil && !errors.Is(err, sluice.ErrNotFound) {
		return fmt.Errorf("request password reset: %w", err)
	}
	// An unknown email queues a job too, naming no member (uuid.Nil), which
	// the mail job drops as it does a member removed since: the request
	// does the same read, the same insert and the same commit either way,
	// so its time does not tell which emails have accounts.
	return c.mail(ctx, cred.Member.ID, member.PurposeReset)
}

// MemberCredential is a member who signed in, with its tenant.
type MemberCredential = store.MemberCredential

// ErrBadPassword is a sign-in whose email and password do not match: an
// unknown email, a member without a password yet, or a wrong password,
// which callers cannot tell apart, by design.
var ErrBadPassword = errors.New("control: the email and password do not match")

// SignIn checks a member's email and password. An unknown email costs a
// password hash as a wrong password does (member.CheckPassword), so the
// time of a sign-in does not tell which emails have accounts. A disabled
// tenant's member signs in, with Tenant.DisabledAt set, for the door to
// refuse.
func (c *Control) SignIn(ctx context.Context, email, password string) (MemberCredential, error) {
	cred, err := c.store.MemberByEmail(ctx, normalizeEmail(email))
	if err != nil && !errors.Is(err, sluice.ErrNotFound) {
		return MemberCredential{}, fmt.Errorf("sign in: %w", err)
	}
	if !member.CheckPassword(cred.PasswordHash, password) {
		return MemberCredential{}, ErrBadPassword
	}
	return cred, nil
}
