package member

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// A token is the secret of one emailed link that sets a member's
// password: an invitation's or a reset's. It is made by the job that
// sends the email (notify), which stores only its SHA-256, so no usable
// token sits at rest; it works once, within TokenTTL.

// TokenTTL is how long an emailed link works.
const TokenTTL = 24 * time.Hour

// Purposes of a token, and of the email that carries it.
const (
	PurposeInvite = "invite"
	PurposeReset  = "reset"
)

const tokenBytes = 32

var tokenEncoding = base64.RawURLEncoding

// NewToken returns a fresh random token, as it goes into a link.
func NewToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // never fails
	return tokenEncoding.EncodeToString(b)
}

// TokenHash is what the database keeps of a token.
func TokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// WellFormedToken reports whether s could be a token, so that garbage
// costs no database round trip.
func WellFormedToken(s string) bool {
	if len(s) != tokenEncoding.EncodedLen(tokenBytes) {
		return false
	}
	_, err := tokenEncoding.DecodeString(s)
	return err == nil
}

// PasswordPath is the dashboard's page an emailed link opens, under
// SLUICE_PUBLIC_URL: /password?token=<token>.
const PasswordPath = "/password"

// PasswordLink is the link that sets a password with token.
func PasswordLink(publicURL, token string) string {
	return publicURL + PasswordPath + "?token=" + token
}
