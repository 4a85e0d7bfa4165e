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
	var sb strings.Builder
	ts := strconv.FormatInt(timestamp, 10)
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(msgID))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		for _, b := range body {
			mac.Write(b)
		}
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	if len(signingKeys) == 0 {
		return sb.String()
	}
	msg := signedContent(msgID, timestamp, body...)
	for _, key := range signingKeys {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1a,")
		sb.WriteString(base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg)))
	}
	return sb.String()
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
