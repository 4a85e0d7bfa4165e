package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// errEmailTaken is the conflict of an email another member has, in any
// tenant: one sign-in form serves them all.
var errEmailTaken = fmt.Errorf("%w: a member with this email already exists", sluice.ErrConflict)

// AddMember adds an invited member to a tenant: email as given (the
// caller trims it), in role. An email any member has, in any case, is
// sluice.ErrConflict.
func (s *Store) AddMember(ctx context.Context, tenantID uuid.UUID, email string, role sluice.Role) (sluice.Member, error) {
	row, err := s.q.InsertMember(ctx, dbq.InsertMemberParams{ID: NewID(), TenantID: tenantID, Email: email, Role: string(role)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return sluice.Member{}, errEmailTaken
	}
	if err != nil {
		return sluice.Member{}, fmt.Errorf("insert member: %w", NotFound(err))
	}
	return memberFromRow(row), nil
}

// ListMembers returns a page of a tenant's members, newest first.
func (s *Store) ListMembers(ctx context.Context, tenantID uuid.UUID, p sluice.PageParams) (sluice.Page[sluice.Member], error) {
	rows, err := s.q.ListMembers(ctx, dbq.ListMembersParams{TenantID: tenantID, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.Member]{}, fmt.Errorf("list members: %w", err)
	}
	return Page(rows, p, func(r dbq.Member) uuid.UUID { return r.ID },
		func(r dbq.Member) (sluice.Member, error) { return memberFromRow(r), nil })
}

// GetMember returns one of a tenant's members; another tenant's is
// sluice.ErrNotFound.
func (s *Store) GetMember(ctx context.Context, tenantID, id uuid.UUID) (sluice.Member, error) {
	row, err := s.q.GetMember(ctx, dbq.GetMemberParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Member{}, NotFound(err)
	}
	return memberFromRow(row), nil
}

// SetMemberRole changes a member's role; its sessions have the new role
// from their next request on.
func (s *Store) SetMemberRole(ctx context.Context, tenantID, id uuid.UUID, role sluice.Role) (sluice.Member, error) {
	row, err := s.q.UpdateMemberRole(ctx, dbq.UpdateMemberRoleParams{TenantID: tenantID, ID: id, Role: string(role)})
	if err != nil {
		return sluice.Member{}, NotFound(err)
	}
	return memberFromRow(row), nil
}

// MemberCredential is a member found by its email, to sign in: with its
// password's hash ("" until it has set one) and its tenant.
type MemberCredential struct {
	Member       sluice.Member
	PasswordHash string
	Tenant       sluice.Tenant
}

// MemberByEmail finds the member with an email, in any case (the caller
// trims it); none is sluice.ErrNotFound.
func (s *Store) MemberByEmail(ctx context.Context, email string) (MemberCredential, error) {
	row, err := s.q.MemberByEmail(ctx, email)
	if err != nil {
		return MemberCredential{}, NotFound(err)
	}
	return MemberCredential{
		Member:       memberFromRow(row.Member),
		PasswordHash: deref(row.Member.PasswordHash),
		Tenant:       tenantFromRow(row.Tenant),
	}, nil
}

// SetMemberPassword uses a link's token: unless it was used already or
// has expired at now (sluice.ErrNotFound, and the token is gone either
// way), it sets the member's password hash, makes every other link of the
// member useless, and ends its dashboard sessions, all in one
// transaction.
func (s *Store) SetMemberPassword(ctx context.Context, tokenHash []byte, passwordHash string, now time.Time) (sluice.Member, error) {
	var m sluice.Member
	expired := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		tok, err := q.UseMemberToken(ctx, tokenHash)
		if err != nil {
			return NotFound(err)
		}
		if !tok.ExpiresAt.After(now) {
			expired = true // commit the token's removal all the same
			return nil
		}
		row, err := q.SetMemberPassword(ctx, dbq.SetMemberPasswordParams{ID: tok.MemberID, PasswordHash: &passwordHash})
		if err != nil {
			return fmt.Errorf("set member password: %w", NotFound(err))
		}
		if err := q.DeleteMemberTokens(ctx, tok.MemberID); err != nil {
			return fmt.Errorf("delete member tokens: %w", err)
		}
		if err := q.DeleteMemberDashboardSessions(ctx, &tok.MemberID); err != nil {
			return fmt.Errorf("delete member sessions: %w", err)
		}
		m = memberFromRow(row)
		return nil
	})
	if err == nil && expired {
		err = sluice.ErrNotFound
	}
	return m, err
}

func memberFromRow(r dbq.Member) sluice.Member {
	m := sluice.Member{ID: r.ID, Email: r.Email, Role: sluice.Role(r.Role), Status: sluice.MemberInvited, CreatedAt: r.CreatedAt}
	if r.PasswordHash != nil {
		m.Status = sluice.MemberActive
	}
	return m
}
