package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// keyCacheTTL bounds how long a resolved key is trusted without asking the
// database again, and so how long a revoked key keeps working on a process
// that saw it just before: revocation takes effect everywhere within this
// (plus one lookup). A busy key costs each API process one indexed lookup
// per keyCacheTTL.
const keyCacheTTL = 500 * time.Millisecond

// keyCache remembers recently resolved API keys for at most its ttl, so a
// busy client does not pay a database round trip per request. Keys are
// looked up by their SHA-256, never stored in plaintext.
type keyCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedKey
}

type cachedKey struct {
	cred    sluice.Credential
	expires time.Time
}

func newKeyCache(ttl time.Duration, max int) *keyCache {
	return &keyCache{ttl: ttl, max: max, now: time.Now, entries: map[[sha256.Size]byte]cachedKey{}}
}

// get returns the credential of a key resolved less than ttl ago, if any.
func (c *keyCache) get(key string) (sluice.Credential, bool) {
	h := sha256.Sum256([]byte(key))
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok || !now.Before(e.expires) {
		return sluice.Credential{}, false
	}
	return e.cred, true
}

// put remembers a key's credential, resolved by a lookup that started at
// looked: the entry lives ttl from then (so a revocation committed while
// the lookup ran is seen within ttl too), and never past the key's own
// expiry.
func (c *keyCache) put(key string, cred sluice.Credential, looked time.Time) {
	expires := looked.Add(c.ttl)
	if cred.ExpiresAt != nil && cred.ExpiresAt.Before(expires) {
		expires = *cred.ExpiresAt
	}
	h := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evictExpired()
	}
	if len(c.entries) >= c.max {
		clear(c.entries) // crude, and rare: a fresh start costs one lookup per key
	}
	c.entries[h] = cachedKey{cred: cred, expires: expires}
}

// evictExpired drops the entries that can no longer be hit; c.mu is held.
func (c *keyCache) evictExpired() {
	now := c.now()
	for h, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, h)
		}
	}
}
