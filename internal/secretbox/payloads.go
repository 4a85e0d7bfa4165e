package secretbox

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// DataKeys keeps each tenant's data keys, wrapped (sealed by a Box). In
// Sluice it is the tenant_data_keys table.
type DataKeys interface {
	// CurrentDataKey returns the tenant's newest data key and its version,
	// storing wrapped as its first one when it has none.
	CurrentDataKey(ctx context.Context, tenantID uuid.UUID, wrapped []byte) (int32, []byte, error)
	// DataKey returns one version of the tenant's data key.
	DataKey(ctx context.Context, tenantID uuid.UUID, version int32) ([]byte, error)
}

// PayloadsConfig configures Payloads.
type PayloadsConfig struct {
	// Seal is whether new payloads are sealed (SLUICE_PAYLOAD_ENCRYPTION).
	// Sealed ones are opened either way.
	Seal bool
	// CacheSize bounds the unwrapped data keys kept in memory;
	// DefaultKeyCache when 0.
	CacheSize int
}

// DefaultKeyCache is the number of unwrapped data keys a process keeps.
const DefaultKeyCache = 10_000

// Payloads seals and opens what tenants send and receive (event payloads,
// stored response bodies, endpoint headers) under a data key per tenant,
// itself wrapped by a Box. Unwrapped keys are cached, so sealing or
// opening costs a key read only the first time a process meets a tenant.
type Payloads struct {
	box   *Box
	keys  DataKeys
	seal  bool
	limit int

	mu    sync.Mutex
	cache map[cacheKey]dataKey
}

// dataKey is an unwrapped data key and its version.
type dataKey struct {
	version int32
	aead    cipher.AEAD
}

// cacheKey names a tenant's data key; version 0 is its current one.
type cacheKey struct {
	tenant  uuid.UUID
	version int32
}

// NewPayloads returns Payloads whose data keys are wrapped by box and kept
// in keys.
func NewPayloads(box *Box, keys DataKeys, cfg PayloadsConfig) *Payloads {
	limit := cfg.CacheSize
	if limit <= 0 {
		limit = DefaultKeyCache
	}
	return &Payloads{box: box, keys: keys, seal: cfg.Seal, limit: limit, cache: make(map[cacheKey]dataKey)}
}

// Sealing reports whether new payloads are sealed: false for a nil
// Payloads.
func (p *Payloads) Sealing() bool { return p != nil && p.seal }

// sealedPrefix starts every sealed value: then the format's version, the
// data key's version and the base64 of nonce and ciphertext, split by ':'.
const sealedPrefix = "sealed:1:"

// textMark precedes a sealed text value (a response body), which, unlike a
// payload or headers (JSON objects), could otherwise be any text.
const textMark = "\x01"

// IsSealedJSON reports whether a stored JSON value is sealed: a JSON string
// holding a sealed value, where a clear one is an object.
func IsSealedJSON(stored []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(stored, " \t\r\n"), []byte(`"`+sealedPrefix))
}

// IsSealedText reports whether a stored text value is sealed.
func IsSealedText(stored string) bool { return strings.HasPrefix(stored, textMark+sealedPrefix) }

// SealJSON returns doc sealed under the tenant's data key, as a JSON
// string to store in its place.
func (p *Payloads) SealJSON(ctx context.Context, tenantID uuid.UUID, doc []byte) ([]byte, error) {
	s, err := p.sealString(ctx, tenantID, doc)
	if err != nil {
		return nil, err
	}
	return []byte(`"` + s + `"`), nil
}

// Stored returns doc as it is to be stored: sealed (SealJSON) when p is
// sealing, else as it is.
func (p *Payloads) Stored(ctx context.Context, tenantID uuid.UUID, doc []byte) ([]byte, error) {
	if !p.Sealing() {
		return doc, nil
	}
	return p.SealJSON(ctx, tenantID, doc)
}

// OpenJSON returns a stored JSON value as it was before SealJSON; a clear
// one (stored before sealing was turned on) is returned as it is.
func (p *Payloads) OpenJSON(ctx context.Context, tenantID uuid.UUID, stored []byte) ([]byte, error) {
	if !IsSealedJSON(stored) {
		return stored, nil
	}
	s := string(bytes.Trim(bytes.TrimSpace(stored), `"`))
	return p.openString(ctx, tenantID, s)
}

// SealText returns text sealed under the tenant's data key.
func (p *Payloads) SealText(ctx context.Context, tenantID uuid.UUID, text string) (string, error) {
	s, err := p.sealString(ctx, tenantID, []byte(text))
	if err != nil {
		return "", err
	}
	return textMark + s, nil
}

// OpenText returns a stored text value as it was before SealText; a clear
// one is returned as it is.
func (p *Payloads) OpenText(ctx context.Context, tenantID uuid.UUID, stored string) (string, error) {
	if !IsSealedText(stored) {
		return stored, nil
	}
	b, err := p.openString(ctx, tenantID, strings.TrimPrefix(stored, textMark))
	return string(b), err
}

// OpenBody returns a stored response body as it was received: a clear one
// as it is, and one that does not open (its key lost, or a receiver's
// answer that merely looks sealed) as it is too, since it is only shown.
func (p *Payloads) OpenBody(ctx context.Context, tenantID uuid.UUID, stored *string) *string {
	if stored == nil || !IsSealedText(*stored) {
		return stored
	}
	body, err := p.OpenText(ctx, tenantID, *stored)
	if err != nil {
		return stored
	}
	return &body
}

func (p *Payloads) sealString(ctx context.Context, tenantID uuid.UUID, plain []byte) (string, error) {
	version, aead, err := p.current(ctx, tenantID)
	if err != nil {
		return "", err
	}
	sealed := seal(aead, plain, tenantID[:])
	return sealedPrefix + strconv.Itoa(int(version)) + ":" + base64.StdEncoding.EncodeToString(sealed), nil
}

func (p *Payloads) openString(ctx context.Context, tenantID uuid.UUID, s string) ([]byte, error) {
	if p == nil {
		return nil, errors.New("secretbox: a sealed value, and no encryption key to open it")
	}
	rest, _ := strings.CutPrefix(s, sealedPrefix)
	v, b64, ok := strings.Cut(rest, ":")
	version, err := strconv.ParseInt(v, 10, 32)
	if !ok || err != nil || version < 1 {
		return nil, errors.New("secretbox: malformed sealed value")
	}
	sealed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("secretbox: malformed sealed value: %w", err)
	}
	aead, err := p.dataKey(ctx, tenantID, int32(version))
	if err != nil {
		return nil, err
	}
	return open(aead, sealed, tenantID[:])
}

// current returns the tenant's current data key, making it on first use.
func (p *Payloads) current(ctx context.Context, tenantID uuid.UUID) (int32, cipher.AEAD, error) {
	if p == nil {
		return 0, nil, errors.New("secretbox: payload encryption has no key")
	}
	p.mu.Lock()
	k, ok := p.cache[cacheKey{tenantID, 0}]
	p.mu.Unlock()
	if ok {
		return k.version, k.aead, nil
	}
	fresh := make([]byte, KeySize)
	if _, err := rand.Read(fresh); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	version, wrapped, err := p.keys.CurrentDataKey(ctx, tenantID, seal(p.box.aead, fresh, tenantID[:]))
	if err != nil {
		return 0, nil, fmt.Errorf("read data key of tenant %s: %w", tenantID, err)
	}
	aead, err := p.unwrap(tenantID, wrapped)
	if err != nil {
		return 0, nil, err
	}
	p.put(cacheKey{tenantID, 0}, dataKey{version, aead})
	p.put(cacheKey{tenantID, version}, dataKey{version, aead})
	return version, aead, nil
}

// dataKey returns one version of the tenant's data key.
func (p *Payloads) dataKey(ctx context.Context, tenantID uuid.UUID, version int32) (cipher.AEAD, error) {
	p.mu.Lock()
	k, ok := p.cache[cacheKey{tenantID, version}]
	p.mu.Unlock()
	if ok {
		return k.aead, nil
	}
	wrapped, err := p.keys.DataKey(ctx, tenantID, version)
	if err != nil {
		return nil, fmt.Errorf("read data key %d of tenant %s: %w", version, tenantID, err)
	}
	aead, err := p.unwrap(tenantID, wrapped)
	if err != nil {
		return nil, err
	}
	p.put(cacheKey{tenantID, version}, dataKey{version, aead})
	return aead, nil
}

func (p *Payloads) unwrap(tenantID uuid.UUID, wrapped []byte) (cipher.AEAD, error) {
	key, err := p.box.open(wrapped, tenantID[:])
	if err != nil {
		return nil, fmt.Errorf("unwrap data key of tenant %s: %w", tenantID, err)
	}
	return newAEAD(key)
}

// put caches one entry, first dropping an arbitrary one when full.
func (p *Payloads) put(k cacheKey, v dataKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.cache[k]; !ok && len(p.cache) >= p.limit {
		for old := range p.cache {
			delete(p.cache, old)
			break
		}
	}
	p.cache[k] = v
}

// Rewrap returns a tenant's wrapped data key wrapped by to, having opened
// it with from (or a previous key of from); done when to's key wraps it
// already, and nothing is to change.
func Rewrap(from, to *Box, tenantID uuid.UUID, wrapped []byte) (out []byte, done bool, err error) {
	return reseal(from, to, wrapped, tenantID[:])
}

// Reseal is Rewrap for a secret sealed by Box.Seal; a nil one stays nil.
func Reseal(from, to *Box, sealed []byte) (out []byte, done bool, err error) {
	if sealed == nil {
		return nil, true, nil
	}
	return reseal(from, to, sealed, nil)
}

func reseal(from, to *Box, sealed, aad []byte) ([]byte, bool, error) {
	if _, err := open(to.aead, sealed, aad); err == nil {
		return sealed, true, nil
	}
	plain, err := from.open(sealed, aad)
	if err != nil {
		return nil, false, err
	}
	return seal(to.aead, plain, aad), false, nil
}
