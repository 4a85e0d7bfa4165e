// Package secretbox encrypts secrets at rest with AES-256-GCM under the key
// given by SLUICE_ENCRYPTION_KEY.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length in bytes of an encryption key.
const KeySize = 32

// Box seals secrets with one key and opens them with that key or any
// previous one given to New, so that what was sealed before a change of
// key still opens while it is being sealed again (sluice keys rotate).
type Box struct {
	aead     cipher.AEAD
	previous []cipher.AEAD
}

// ParseKey decodes a 32-byte key written as standard base64, URL-safe
// base64 or hex.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, decode := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString,
		base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString,
		base64.RawURLEncoding.DecodeString,
		hex.DecodeString,
	} {
		if key, err := decode(s); err == nil && len(key) == KeySize {
			return key, nil
		}
	}
	return nil, fmt.Errorf("encryption key must be %d bytes in base64 or hex", KeySize)
}

// New returns a Box that seals with a 32-byte key and opens with it or
// any of previous (nil ones are skipped).
func New(key []byte, previous ...[]byte) (*Box, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	b := &Box{aead: aead}
	for _, k := range previous {
		if k == nil {
			continue
		}
		prev, err := newAEAD(k)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		b.previous = append(b.previous, prev)
	}
	return b, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("make AES cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("make GCM: %w", err)
	}
	return aead, nil
}

// Seal encrypts plaintext; the random nonce is prepended to the result.
func (b *Box) Seal(plaintext []byte) []byte { return seal(b.aead, plaintext, nil) }

// Open decrypts what Seal produced, with the key or a previous one.
func (b *Box) Open(sealed []byte) ([]byte, error) { return b.open(sealed, nil) }

func (b *Box) open(sealed, aad []byte) ([]byte, error) {
	plaintext, err := open(b.aead, sealed, aad, false)
	for _, prev := range b.previous {
		if err == nil {
			break
		}
		plaintext, err = open(prev, sealed, aad, false)
	}
	return plaintext, err
}

// seal encrypts plaintext bound to aad; the random nonce is prepended to
// the result.
func seal(aead cipher.AEAD, plaintext, aad []byte) []byte {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return aead.Seal(nonce, nonce, plaintext, aad)
}

// open returns what sealed holds; inPlace decrypts over sealed itself,
// which then holds nothing usable, even when it does not open.
func open(aead cipher.AEAD, sealed, aad []byte, inPlace bool) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("secretbox: ciphertext too short")
	}
	var dst []byte
	if inPlace {
		dst = sealed[n:n]
	}
	plaintext, err := aead.Open(dst, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("secretbox: decrypt: %w", err)
	}
	return plaintext, nil
}
