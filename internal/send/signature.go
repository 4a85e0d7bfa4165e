// Signing secrets and key pairs, and deliveries signed the Standard
// Webhooks way: v1 signatures are base64 HMAC-SHA256 over
// "id.timestamp.body" keyed with the secret's decoded bytes; v1a
// signatures are base64 Ed25519 signatures of the same bytes.

package send

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// NewSecret returns a fresh signing secret: "whsec_" and 24 random bytes in
// standard base64, the form Standard Webhooks libraries accept.
func NewSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Key decodes a secret into the HMAC key it stands for.
func Key(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, errors.New("signature: secret is not base64")
	}
	return key, nil
}

// Sign returns the webhook-signature header value for one message: one
// "v1,<sig>" per key, space separated, so receivers holding either the new or
// the previous secret during a rotation can verify it.
func Sign(keys [][]byte, msgID string, timestamp int64, body []byte) string {
	return Signatures(keys, nil, msgID, timestamp, body)
}

// Signatures returns the webhook-signature header value for one message:
// one "v1,<sig>" per HMAC key, then one "v1a,<sig>" per Ed25519 key, space
// separated, so receivers holding any of the keys can verify it.
func Signatures(keys [][]byte, signingKeys []ed25519.PrivateKey, msgID string, timestamp int64, body []byte) string {
	return signatures(keys, signingKeys, msgID, timestamp, body)
}

// signatures is Signatures of a body given in parts, signed as one.
func signatures(keys [][]byte, signingKeys []ed25519.PrivateKey, msgID string, timestamp int64, body ...[]byte) string {
	// The header, written once: "v1," and 44 base64 characters a key, a
	// space between, and room for the v1a signatures after.
	out := make([]byte, 0, len(keys)*48+len(signingKeys)*93)
	if len(keys) > 0 {
		head := make([]byte, 0, len(msgID)+22) // "id.timestamp."
		head = append(append(head, msgID...), '.')
		head = append(strconv.AppendInt(head, timestamp, 10), '.')
		var sum [sha256.Size]byte
		for _, key := range keys {
			mac := hmac.New(sha256.New, key)
			mac.Write(head)
			for _, b := range body {
				mac.Write(b)
			}
			if len(out) > 0 {
				out = append(out, ' ')
			}
			out = append(out, "v1,"...)
			out = base64.StdEncoding.AppendEncode(out, mac.Sum(sum[:0]))
		}
	}
	if len(signingKeys) > 0 {
		msg := signedContent(msgID, timestamp, body...)
		for _, key := range signingKeys {
			if len(out) > 0 {
				out = append(out, ' ')
			}
			out = append(out, "v1a,"...)
			out = base64.StdEncoding.AppendEncode(out, ed25519.Sign(key, msg))
		}
	}
	return string(out)
}

// SignedContent is what a signature signs: "<id>.<timestamp>.<body>".
func SignedContent(msgID string, timestamp int64, body []byte) []byte {
	return signedContent(msgID, timestamp, body)
}

// signedContent is SignedContent of a body given in parts.
func signedContent(msgID string, timestamp int64, body ...[]byte) []byte {
	n := len(msgID) + 22
	for _, b := range body {
		n += len(b)
	}
	msg := make([]byte, 0, n)
	msg = append(msg, msgID...)
	msg = append(msg, '.')
	msg = strconv.AppendInt(msg, timestamp, 10)
	msg = append(msg, '.')
	for _, b := range body {
		msg = append(msg, b...)
	}
	return msg
}

// PublicKeyPrefix starts the text of every v1a public key.
const PublicKeyPrefix = "whpk_"

// NewSigningKey returns a fresh Ed25519 key pair for v1a signatures.
func NewSigningKey() ed25519.PrivateKey {
	_, key, _ := ed25519.GenerateKey(rand.Reader) // crypto/rand does not fail
	return key
}

// PublicKeyText is a v1a public key as the API shows it: "whpk_" and the
// 32-byte key in standard base64.
func PublicKeyText(key ed25519.PublicKey) string {
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(key)
}
