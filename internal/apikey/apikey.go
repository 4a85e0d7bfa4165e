// Package apikey makes and recognises tenant API keys. A key is "sk_" followed
// by 32 random bytes in URL-safe base64; only its SHA-256 hash is stored, so
// a leaked database does not leak keys. Keys carry 256 bits of entropy, which
// is why a fast hash is enough.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Prefix starts every key, so keys are recognisable in logs and by secret
// scanners.
const Prefix = "sk_"

const encodedLen = 43 // base64.RawURLEncoding of 32 bytes

// New returns a fresh random key.
func New() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what the database stores for key.
func Hash(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// DisplayPrefix is the part of a key safe to store and show: the prefix and
// the first four random characters.
func DisplayPrefix(key string) string {
	return key[:len(Prefix)+4]
}

// WellFormed reports whether key has the shape of a Sluice key, so malformed
// credentials are refused without a database round trip.
func WellFormed(key string) bool {
	if !strings.HasPrefix(key, Prefix) || len(key) != len(Prefix)+encodedLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(key[len(Prefix):])
	return err == nil
}

// Digest is what the database keeps of key: its hash and display prefix.
func Digest(key string) sluice.KeyDigest {
	return sluice.KeyDigest{Hash: Hash(key), Prefix: DisplayPrefix(key)}
}
