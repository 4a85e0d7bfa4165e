package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Dashboard sessions live on the server, in the dashboard_sessions table:
// the browser's cookie holds only a random token, the table its SHA-256,
// the tenant, the API key, portal link or member the session was opened
// with and its expiry. Removing a member deletes its sessions, and its
// role is read on every request; sign-out deletes the row; revoking a key
// deletes its sessions too, and an expired key's sessions stop at once.
// Opening and ending a session are not changes of the tenant: nothing is
// recorded.

// SessionTTL is how long a sign-in with an API key or a password lasts.
const SessionTTL = 12 * time.Hour

// The session types, as the store loads them.
type (
	// Session is a live dashboard session.
	Session = store.DashboardSession
	// SessionMember names the member of a member's session.
	SessionMember = store.SessionMember
	// PortalConsumer names the consumer of a portal session.
	PortalConsumer = store.PortalConsumer
)

// NewSession is a session just opened: the token the browser's cookie
// holds, and when the session ends.
type NewSession struct {
	Token     string
	ExpiresAt time.Time
}

const sessionTokenBytes = 32

var sessionEncoding = base64.RawURLEncoding

// newSession makes a session's token, lasting until expires, and the hash
// the store keeps of it.
func newSession(expires time.Time) (NewSession, []byte) {
	b := make([]byte, sessionTokenBytes)
	_, _ = rand.Read(b) // never fails
	s := NewSession{Token: sessionEncoding.EncodeToString(b), ExpiresAt: expires}
	return s, sessionHash(s.Token)
}

func sessionHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// WellFormedSessionToken reports whether a cookie's value could be a
// session's token, so that garbage costs no database round trip.
func WellFormedSessionToken(v string) bool {
	if len(v) != sessionEncoding.EncodedLen(sessionTokenBytes) {
		return false
	}
	_, err := sessionEncoding.DecodeString(v)
	return err == nil
}

// OpenKeySession opens a tenant's session with the API key cred
// (Authenticate), for SessionTTL. A key revoked meanwhile is
// sluice.ErrNotFound.
func (c *Control) OpenKeySession(ctx context.Context, cred sluice.Credential) (NewSession, error) {
	s, hash := newSession(c.now().Add(SessionTTL))
	if err := c.store.CreateDashboardSession(ctx, dbq.CreateDashboardSessionParams{
		TokenHash: hash, TenantID: cred.Tenant.ID, ApiKeyID: &cred.APIKeyID, ExpiresAt: s.ExpiresAt,
	}); err != nil {
		return NewSession{}, fmt.Errorf("open key session: %w", err)
	}
	return s, nil
}

// OpenMemberSession opens a member's session (SignIn), for SessionTTL. A
// member removed meanwhile is sluice.ErrNotFound.
func (c *Control) OpenMemberSession(ctx context.Context, cred MemberCredential) (NewSession, error) {
	s, hash := newSession(c.now().Add(SessionTTL))
	if err := c.store.CreateDashboardSession(ctx, dbq.CreateDashboardSessionParams{
		TokenHash: hash, TenantID: cred.Tenant.ID, MemberID: &cred.Member.ID, ExpiresAt: s.ExpiresAt,
	}); err != nil {
		return NewSession{}, fmt.Errorf("open member session: %w", err)
	}
	return s, nil
}

// OpenPortalSession opens the portal session a link grants
// (OpenPortalLink), until the link expires. A consumer deleted meanwhile
// is sluice.ErrNotFound.
func (c *Control) OpenPortalSession(ctx context.Context, g PortalGrant) (NewSession, error) {
	s, hash := newSession(g.ExpiresAt)
	if err := c.store.CreateDashboardSession(ctx, dbq.CreateDashboardSessionParams{
		TokenHash: hash, TenantID: g.Target.Tenant.ID, ConsumerID: &g.Target.Consumer.ID,
		ReadOnly: g.ReadOnly, ExpiresAt: g.ExpiresAt,
	}); err != nil {
		return NewSession{}, fmt.Errorf("open portal session: %w", err)
	}
	return s, nil
}

// Session loads the live session of a token: one that has not expired,
// nor been signed out, and whose API key is neither revoked nor expired.
// Anything else is sluice.ErrNotFound.
func (c *Control) Session(ctx context.Context, token string) (Session, error) {
	if !WellFormedSessionToken(token) {
		return Session{}, sluice.ErrNotFound
	}
	return c.store.DashboardSession(ctx, sessionHash(token))
}

// EndSession ends the session of a token: sign-out.
func (c *Control) EndSession(ctx context.Context, token string) error {
	if err := store.Exec(ctx, c.store, (*dbq.Queries).DeleteDashboardSession, sessionHash(token)); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}
