package control

// Portal links: signed, expiring URLs that sign one of a tenant's
// consumers in to the dashboard, scoped to that consumer. A link carries
// the consumer's id, its portal generation, an expiry and whether it is
// read-only, under an HMAC-SHA256 keyed from SLUICE_ENCRYPTION_KEY
// (Config.PortalKey). Revoking a consumer's portal draws a new generation,
// so every link signed before stops working at once, on every process,
// without a list of revoked links.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// PortalPath is where a portal link points, under the public URL; the
// token is its "token" query parameter.
const PortalPath = "/portal"

// ErrInvalidLink is a link that is malformed, forged, expired or revoked,
// or whose consumer is gone. Callers cannot tell which, by design.
var ErrInvalidLink = errors.New("control: invalid or expired portal link")

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

// portalLinks signs and checks portal links.
type portalLinks struct {
	key       []byte
	publicURL string
}

// newPortalLinks returns links keyed from key, made under publicURL
// (SLUICE_PUBLIC_URL); an empty key is a random one.
func newPortalLinks(key []byte, publicURL string) portalLinks {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyLabel))
	return portalLinks{key: m.Sum(nil), publicURL: publicURL}
}

// portalLink signs a link to the portal of the consumer id of the given
// generation, valid for ttl.
func (l portalLinks) link(consumerID, generation uuid.UUID, expires time.Time, readOnly bool) sluice.PortalLink {
	token := l.sign(grant{consumerID: consumerID, generation: generation, expires: expires, readOnly: readOnly})
	u := l.publicURL + PortalPath + "?" + url.Values{"token": {token}}.Encode()
	return sluice.PortalLink{URL: u, ExpiresAt: expires}
}

// PortalGrant is what a valid link grants: a portal session of its
// consumer, read-only or not, until ExpiresAt.
type PortalGrant struct {
	Target    store.PortalTarget
	ReadOnly  bool
	ExpiresAt time.Time
}

// OpenPortalLink checks a link's token as a consumer signs in with it:
// its signature, its expiry, and that its consumer still exists with the
// generation it was signed for. Any failure is ErrInvalidLink, or an
// error of the database. It is not a change: nothing is recorded.
func (c *Control) OpenPortalLink(ctx context.Context, token string) (PortalGrant, error) {
	g, ok := c.links.verify(token)
	if !ok || !c.now().Before(g.expires) {
		return PortalGrant{}, ErrInvalidLink
	}
	t, err := c.store.PortalTarget(ctx, g.consumerID)
	if errors.Is(err, sluice.ErrNotFound) {
		return PortalGrant{}, ErrInvalidLink
	}
	if err != nil {
		return PortalGrant{}, fmt.Errorf("open portal link: %w", err)
	}
	if !hmac.Equal(t.Generation[:], g.generation[:]) {
		return PortalGrant{}, ErrInvalidLink
	}
	return PortalGrant{Target: t, ReadOnly: g.readOnly, ExpiresAt: g.expires}, nil
}

// grant is the signed content of a token.
type grant struct {
	consumerID, generation uuid.UUID
	expires                time.Time
	readOnly               bool
}

func (l portalLinks) sign(g grant) string {
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

func (l portalLinks) verify(token string) (grant, bool) {
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

func (l portalLinks) mac(body []byte) []byte {
	m := hmac.New(sha256.New, l.key)
	m.Write(body)
	return m.Sum(nil)
}
