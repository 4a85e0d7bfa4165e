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
	aad     []byte // the tenant's ID, bound to everything the key seals
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
	return p.sealTo(ctx, tenantID, doc, `"`, `"`)
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
	return p.open(ctx, tenantID, bytes.Trim(bytes.TrimSpace(stored), `"`))
}

// SealText returns text sealed under the tenant's data key.
func (p *Payloads) SealText(ctx context.Context, tenantID uuid.UUID, text string) (string, error) {
	b, err := p.sealTo(ctx, tenantID, []byte(text), textMark, "")
	return string(b), err
}

// OpenText returns a stored text value as it was before SealText; a clear
// one is returned as it is.
func (p *Payloads) OpenText(ctx context.Context, tenantID uuid.UUID, stored string) (string, error) {
	if !IsSealedText(stored) {
		return stored, nil
	}
	b, err := p.open(ctx, tenantID, []byte(strings.TrimPrefix(stored, textMark)))
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

// sealTo returns plain sealed under the tenant's current data key and
// encoded as sealedPrefix, the key's version, ':' and the base64 of nonce
// and ciphertext, between before and after: one buffer, written once.
func (p *Payloads) sealTo(ctx context.Context, tenantID uuid.UUID, plain []byte, before, after string) ([]byte, error) {
	k, err := p.current(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	sealed := seal(k.aead, plain, k.aad)
	enc := base64.StdEncoding
	out := make([]byte, 0, len(before)+len(sealedPrefix)+11+enc.EncodedLen(len(sealed))+len(after))
	out = append(out, before...)
	out = append(out, sealedPrefix...)
	out = strconv.AppendInt(out, int64(k.version), 10)
	out = append(out, ':')
	out = enc.AppendEncode(out, sealed)
	return append(out, after...), nil
}

// open returns what a sealed value (sealedPrefix onwards) holds, decoding
// and decrypting in one buffer.
func (p *Payloads) open(ctx context.Context, tenantID uuid.UUID, s []byte) ([]byte, error) {
	if p == nil {
		return nil, errors.New("secretbox: a sealed value, and no encryption key to open it")
	}
	rest, _ := bytes.CutPrefix(s, []byte(sealedPrefix))
	v, b64, ok := bytes.Cut(rest, []byte(":"))
	version, err := strconv.ParseInt(string(v), 10, 32)
	if !ok || err != nil || version < 1 {
		return nil, errors.New("secretbox: malformed sealed value")
	}
	sealed := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(sealed, b64)
	if err != nil {
		return nil, fmt.Errorf("secretbox: malformed sealed value: %w", err)
	}
	k, err := p.dataKey(ctx, tenantID, int32(version))
	if err != nil {
		return nil, err
	}
	return open(k.aead, sealed[:n], k.aad, true)
}

// current returns the tenant's current data key, making it on first use.
func (p *Payloads) current(ctx context.Context, tenantID uuid.UUID) (dataKey, error) {
	if p == nil {
		return dataKey{}, errors.New("secretbox: payload encryption has no key")
	}
	if k, ok := p.cached(cacheKey{tenantID, 0}); ok {
		return k, nil
	}
	version, wrapped, err := p.keys.CurrentDataKey(ctx, tenantID, p.wrapFresh(tenantID))
	if err != nil {
		return dataKey{}, fmt.Errorf("read data key of tenant %s: %w", tenantID, err)
	}
	k, err := p.unwrap(tenantID, version, wrapped)
	if err != nil {
		return dataKey{}, err
	}
	p.put(cacheKey{tenantID, 0}, k)
	p.put(cacheKey{tenantID, version}, k)
	return k, nil
}

// wrapFresh returns a new data key for the tenant, wrapped.
func (p *Payloads) wrapFresh(tenantID uuid.UUID) []byte {
	fresh := make([]byte, KeySize)
	if _, err := rand.Read(fresh); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return seal(p.box.aead, fresh, tenantID[:])
}

// dataKey returns one version of the tenant's data key.
func (p *Payloads) dataKey(ctx context.Context, tenantID uuid.UUID, version int32) (dataKey, error) {
	if k, ok := p.cached(cacheKey{tenantID, version}); ok {
		return k, nil
	}
	wrapped, err := p.keys.DataKey(ctx, tenantID, version)
	if err != nil {
		return dataKey{}, fmt.Errorf("read data key %d of tenant %s: %w", version, tenantID, err)
	}
	k, err := p.unwrap(tenantID, version, wrapped)
	if err != nil {
		return dataKey{}, err
	}
	p.put(cacheKey{tenantID, version}, k)
	return k, nil
}

func (p *Payloads) unwrap(tenantID uuid.UUID, version int32, wrapped []byte) (dataKey, error) {
	aad := tenantID[:]
	key, err := p.box.open(wrapped, aad)
	if err != nil {
		return dataKey{}, fmt.Errorf("unwrap data key of tenant %s: %w", tenantID, err)
	}
	aead, err := newAEAD(key)
	return dataKey{version: version, aead: aead, aad: aad}, err
}

func (p *Payloads) cached(k cacheKey) (dataKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.cache[k]
	return v, ok
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
	if _, err := open(to.aead, sealed, aad, false); err == nil {
		return sealed, true, nil
	}
	plain, err := from.open(sealed, aad)
	if err != nil {
		return nil, false, err
	}
	return seal(to.aead, plain, aad), false, nil
}
