package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// keyCache remembers recently resolved API keys for a short while, so a busy
// client does not pay a database round trip per request. Keys are looked up
// by their SHA-256, never stored in plaintext.
type keyCache struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedTenant
}

type cachedTenant struct {
	tenant  sluice.Tenant
	expires time.Time
}

func newKeyCache(ttl time.Duration, max int) *keyCache {
	return &keyCache{ttl: ttl, max: max, entries: map[[sha256.Size]byte]cachedTenant{}}
}

func (c *keyCache) get(key string) (sluice.Tenant, bool) {
	h := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok || time.Now().After(e.expires) {
		return sluice.Tenant{}, false
	}
	return e.tenant, true
}

func (c *keyCache) put(key string, t sluice.Tenant) {
	h := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		clear(c.entries) // crude, and rare: a fresh start costs one lookup per key
	}
	c.entries[h] = cachedTenant{tenant: t, expires: time.Now().Add(c.ttl)}
}
