// Package signature makes endpoint signing secrets and signs deliveries the
// Standard Webhooks way: v1 signatures are base64 HMAC-SHA256 over
// "id.timestamp.body" keyed with the secret's decoded bytes.
package send

import (
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
	var sb strings.Builder
	ts := strconv.FormatInt(timestamp, 10)
	for i, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(msgID))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return sb.String()
}
