package apirate

import (
	"crypto/sha256"
	"net/netip"
	"sync"
	"time"
)

// DefaultAuthLookupRate is how many credentials a client address over its
// failed authentications may still have looked up and found wrong: ten a
// second with bursts of twenty, so that a flood of guesses from one address
// costs the database at most that many indexed reads a second.
var DefaultAuthLookupRate = MustParse("10/s")

// Credentials a door verified are remembered as good for knownFor since
// their last success, at most knownMax of them: such a credential is looked
// up whatever its address has failed. Remembering one is not trusting it:
// it is still looked up, and a revoked one still fails.
const (
	knownFor = time.Hour
	knownMax = 100_000
)

// Gate is what a door does with a credential from a client address, by
// GateAuth.
type Gate int

const (
	// GateOpen: the address may still fail. Look the credential up; a
	// wrong one answers 401 (or the door's own refusal) and FailAuth.
	GateOpen Gate = iota
	// GateLookUp: the address has failed too often, but the credential is
	// still looked up, and served if valid. A wrong one answers 429 and
	// FailLookup.
	GateLookUp
	// GateShut: the address has failed too often and the credential is not
	// looked up: answer 429.
	GateShut
)

// GateAuth decides what a door does with a credential from addr (a
// secret: an API key, a session cookie), before looking it up. An address
// that may still fail is looked up as usual (GateOpen). One that may not
// still has a credential looked up (GateLookUp) if the credential was
// found valid here lately (Verified), or if the address's bucket of
// failed look-ups holds a token; otherwise it is refused unlooked
// (GateShut). An empty credential is never looked up past the limit. res
// is the failures bucket's state, for a refusal's Retry-After.
//
// So a valid credential is refused for its address's failures only when
// it is new to this process and its address is also spending the look-ups
// of a flood; and a guesser's look-ups are bounded by both buckets.
func (l *Limits) GateAuth(addr netip.Prefix, credential string) (g Gate, res Result) {
	res = l.addrs.Peek(addr, l.cfg.Auth, 1)
	switch {
	case res.Allowed:
		return GateOpen, res
	case credential == "":
		return GateShut, res
	case l.known.has(credential, l.cfg.Now()):
		return GateLookUp, res
	case l.lookups.Peek(addr, l.cfg.AuthLookup, 1).Allowed:
		return GateLookUp, res
	}
	return GateShut, res
}

// Verified records that credential was looked up and found valid, so that
// GateAuth lets it be looked up from an address over its limit. A door
// calls it on every successful look-up.
func (l *Limits) Verified(credential string) {
	l.known.add(credential, l.cfg.Now())
}

// FailLookup charges a credential looked up past the address's limit
// (GateLookUp) and found wrong: a failed authentication, and a failed
// look-up. The result is the failures bucket's, for the 429's Retry-After.
func (l *Limits) FailLookup(addr netip.Prefix) Result {
	l.lookups.Charge(addr, l.cfg.AuthLookup, 1)
	return l.addrs.Charge(addr, l.cfg.Auth, 1)
}

// knownSet is the SHA-256 of credentials found valid lately, with when.
type knownSet struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]time.Time
}

func (k *knownSet) has(credential string, now time.Time) bool {
	h := sha256.Sum256([]byte(credential))
	k.mu.Lock()
	defer k.mu.Unlock()
	at, ok := k.entries[h]
	return ok && now.Sub(at) < knownFor
}

func (k *knownSet) add(credential string, now time.Time) {
	h := sha256.Sum256([]byte(credential))
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.entries == nil {
		k.entries = map[[sha256.Size]byte]time.Time{}
	}
	if _, ok := k.entries[h]; !ok && len(k.entries) >= knownMax {
		for e, at := range k.entries {
			if now.Sub(at) >= knownFor {
				delete(k.entries, e)
			}
		}
		if len(k.entries) >= knownMax {
			clear(k.entries) // crude and rare: a fresh start costs nothing but the memory of who was good
		}
	}
	k.entries[h] = now
}
