// Package portal makes and checks portal links: signed, expiring URLs that
// sign one of a tenant's consumers in to the dashboard, scoped to that
// consumer. A link carries the consumer's id, its portal generation, an
// expiry and whether it is read-only, under an HMAC-SHA256 keyed from
// SLUICE_ENCRYPTION_KEY. Revoking a consumer's portal draws a new
// generation, so every link signed before stops working at once, on every
// process, without a list of revoked links.
package portal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// Path is where a portal link points, under the public URL; the token is
// its "token" query parameter.
const Path = "/portal"

// ErrInvalidLink is a link that is malformed, forged, expired or revoked,
// or whose consumer is gone. Callers cannot tell which, by design.
var ErrInvalidLink = errors.New("portal: invalid or expired link")

// keyLabel derives the links' HMAC key from the encryption key; the
// encryption key itself is never used as is.
const keyLabel = "sluice portal link v1"

// Token layout: version, consumer id, generation, expiry (unix seconds),
// flags, then the MAC of all of that.
const (
	tokenVersion = 1
	bodyLen      = 1 + 16 + 16 + 8 + 1
	macLen       = sha256.Size
	flagReadOnly = 1
)

// Links signs and checks portal links.
type Links struct {
	store     *store.Store
	key       []byte
	publicURL string
	now       func() time.Time
}

// New returns Links on st, keyed from the encryption key, making URLs under
// publicURL (SLUICE_PUBLIC_URL). It panics when key is empty.
func New(st *store.Store, key []byte, publicURL string) *Links {
	if len(key) == 0 {
		panic("portal: empty key")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyLabel))
	return &Links{store: st, key: m.Sum(nil), publicURL: publicURL, now: time.Now}
}

// Link signs a link to the portal of the tenant's consumer uid, valid for
// ttl. An unknown consumer is sluice.ErrNotFound.
func (l *Links) Link(ctx context.Context, tenantID uuid.UUID, uid string, ttl time.Duration, readOnly bool) (sluice.PortalLink, error) {
	consumerID, generation, err := l.store.PortalGeneration(ctx, tenantID, uid)
	if err != nil {
		return sluice.PortalLink{}, err
	}
	expires := l.now().Add(ttl).Truncate(time.Second).UTC()
	token := l.sign(grant{consumerID: consumerID, generation: generation, expires: expires, readOnly: readOnly})
	u := l.publicURL + Path + "?" + url.Values{"token": {token}}.Encode()
	return sluice.PortalLink{URL: u, ExpiresAt: expires}, nil
}

// Grant is what a valid link grants: a portal session of its consumer,
// read-only or not, until ExpiresAt.
type Grant struct {
	Target    store.PortalTarget
	ReadOnly  bool
	ExpiresAt time.Time
}

// Open checks a link's token: its signature, its expiry, and that its
// consumer still exists with the generation it was signed for. Any failure
// is ErrInvalidLink, or an error of the database.
func (l *Links) Open(ctx context.Context, token string) (Grant, error) {
	g, ok := l.verify(token)
	if !ok || !l.now().Before(g.expires) {
		return Grant{}, ErrInvalidLink
	}
	t, err := l.store.PortalTarget(ctx, g.consumerID)
	if errors.Is(err, sluice.ErrNotFound) {
		return Grant{}, ErrInvalidLink
	}
	if err != nil {
		return Grant{}, err
	}
	if !hmac.Equal(t.Generation[:], g.generation[:]) {
		return Grant{}, ErrInvalidLink
	}
	return Grant{Target: t, ReadOnly: g.readOnly, ExpiresAt: g.expires}, nil
}

// grant is the signed content of a token.
type grant struct {
	consumerID, generation uuid.UUID
	expires                time.Time
	readOnly               bool
}

func (l *Links) sign(g grant) string {
	b := make([]byte, 0, bodyLen+macLen)
	b = append(b, tokenVersion)
	b = append(b, g.consumerID[:]...)
	b = append(b, g.generation[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(g.expires.Unix()))
	var flags byte
	if g.readOnly {
		flags |= flagReadOnly
	}
	b = append(b, flags)
	b = append(b, l.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l *Links) verify(token string) (grant, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(token) // one spelling per token
	if err != nil || len(b) != bodyLen+macLen || b[0] != tokenVersion {
		return grant{}, false
	}
	body, mac := b[:bodyLen], b[bodyLen:]
	if !hmac.Equal(mac, l.mac(body)) {
		return grant{}, false
	}
	var g grant
	copy(g.consumerID[:], body[1:17])
	copy(g.generation[:], body[17:33])
	g.expires = time.Unix(int64(binary.BigEndian.Uint64(body[33:41])), 0).UTC()
	g.readOnly = body[41]&flagReadOnly != 0
	return g, true
}

func (l *Links) mac(body []byte) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write(body)
	return m.Sum(nil)
}
