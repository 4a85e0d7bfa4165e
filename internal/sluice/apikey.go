package sluice

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// APIKey is one of a tenant's API keys as it is listed: never the key
// itself, which is shown once, at creation (NewAPIKey).
type APIKey struct {
	ID     uuid.UUID `json:"id"`
	Name   string    `json:"name"`
	Prefix string    `json:"prefix"` // "sk_" and the key's first four characters
	// LastUsedAt is coarse: it is written at most once a minute per key.
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// Expired reports whether the key no longer authenticates at now.
func (k APIKey) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// NewAPIKey is a key just created: its record and, this once, the key.
type NewAPIKey struct {
	Key string `json:"key"`
	APIKey
}

// NewAPIKeyParams are what a caller chooses about a new key.
type NewAPIKeyParams struct {
	Name      string
	ExpiresAt *time.Time // nil: never expires
}

// Credential is what an API key authenticates as: its tenant, the key's id
// and when it stops working.
type Credential struct {
	Tenant     Tenant
	APIKeyID   uuid.UUID
	APIKeyName string
	ExpiresAt  *time.Time
	// APIRate is the tenant's own API rate limit as stored ("100/s"), read
	// with the key; nil when the tenant has the server's.
	APIRate *string
}

// MaxAPIKeyNameLength bounds an API key's name, in characters.
const MaxAPIKeyNameLength = 100

// Validate checks p at now: a name of 1 to MaxAPIKeyNameLength characters
// (not only spaces) and an expiry, if any, in the future.
func (p NewAPIKeyParams) Validate(now time.Time) error {
	v := &ValidationError{}
	switch n := utf8.RuneCountInString(p.Name); {
	case strings.TrimSpace(p.Name) == "":
		v.Add("name", "is required")
	case n > MaxAPIKeyNameLength:
		v.Add("name", "must be at most %d characters", MaxAPIKeyNameLength)
	}
	if p.ExpiresAt != nil && !p.ExpiresAt.After(now) {
		v.Add("expires_at", "must be in the future")
	}
	return v.Err()
}

// KeyDigest is what is kept of an API key: its SHA-256 and the part of it
// safe to show. The key itself is never stored (package apikey makes
// both).
type KeyDigest struct {
	Hash   []byte
	Prefix string
}
