package send

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

func TestSignKnownVector(t *testing.T) {
	t.Parallel()
	key, err := Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestSignVerifiesWithLibrary(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := NewSecret(), NewSecret()
	require.True(t, strings.HasPrefix(newSecret, SecretPrefix))
	oldKey, err := Key(oldSecret)
	require.NoError(t, err)
	newKey, err := Key(newSecret)
	require.NoError(t, err)

	body := []byte(`{"id":"m1","type":"a.b","timestamp":"x","data":{}}`)
	now := time.Now().Unix()
	sig := Sign([][]byte{newKey, oldKey}, "m1", now, body)
	header := http.Header{}
	header.Set("webhook-id", "m1")
	header.Set("webhook-timestamp", strconv.FormatInt(now, 10))
	header.Set("webhook-signature", sig)

	for _, secret := range []string{oldSecret, newSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, header), "secret %s must verify", secret)
	}
	stranger, err := standardwebhooks.NewWebhook(NewSecret())
	require.NoError(t, err)
	require.Error(t, stranger.Verify(body, header))
}

// verifyV1a reports whether header, a webhook-signature value, holds a v1a
// signature of the message that key verifies.
func verifyV1a(key ed25519.PublicKey, header, msgID string, timestamp int64, body []byte) bool {
	msg := []byte(msgID + "." + strconv.FormatInt(timestamp, 10) + "." + string(body))
	for _, sig := range strings.Fields(header) {
		b64, ok := strings.CutPrefix(sig, "v1a,")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && ed25519.Verify(key, msg, raw) {
			return true
		}
	}
	return false
}

func TestSignV1a(t *testing.T) {
	t.Parallel()
	hmacKey, err := Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	current, previous := NewSigningKey(), NewSigningKey()
	id, ts, body := "msg_p5jXN8AQM9LWM0D4loKWxJek", int64(1614265330), []byte(`{"test": 2432232314}`)

	both := Signatures([][]byte{hmacKey}, []ed25519.PrivateKey{current, previous}, id, ts, body)
	parts := strings.Fields(both)
	require.Len(t, parts, 3)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", parts[0], "the v1 signature first, unchanged")
	require.True(t, strings.HasPrefix(parts[1], "v1a,") && strings.HasPrefix(parts[2], "v1a,"))
	for _, key := range []ed25519.PrivateKey{current, previous} {
		pub := key.Public().(ed25519.PublicKey)
		require.True(t, verifyV1a(pub, both, id, ts, body), "each key verifies during a rotation")
		require.False(t, verifyV1a(pub, both, id, ts+1, body), "another timestamp")
		require.False(t, verifyV1a(pub, both, "msg_other", ts, body), "another id")
		require.False(t, verifyV1a(pub, both, id, ts, []byte(`{"test": 2432232315}`)), "another body")
	}
	require.False(t, verifyV1a(NewSigningKey().Public().(ed25519.PublicKey), both, id, ts, body), "a stranger's key")

	// v1a alone: no v1 signature; it signs "<id>.<ts>.<body>" as
	// crypto/ed25519 does, deterministically.
	alone := Signatures(nil, []ed25519.PrivateKey{current}, id, ts, body)
	want := ed25519.Sign(current, []byte(id+".1614265330."+string(body)))
	require.Equal(t, "v1a,"+base64.StdEncoding.EncodeToString(want), alone)
}

func TestPublicKeyText(t *testing.T) {
	t.Parallel()
	// RFC 8032 §7.1, test 1.
	seed, err := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	require.NoError(t, err)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	require.Equal(t, "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", PublicKeyText(pub))
	require.Len(t, NewSigningKey().Seed(), ed25519.SeedSize)
	require.NotEqual(t, NewSigningKey(), NewSigningKey())
}

// signV1Allocs is what one v1 signature with one key allocated before v1a
// (the HMAC's state, its sum, the base64 text, the header).
const signV1Allocs = 15

// TestSignV1CostsNothingNew: an endpoint that signs v1 alone allocates no
// more for its signature than before v1a existed.
func TestSignV1CostsNothingNew(t *testing.T) {
	key, err := Key(NewSecret())
	require.NoError(t, err)
	body := []byte(strings.Repeat("x", 1024))
	keys := [][]byte{key}
	allocs := testing.AllocsPerRun(100, func() { _ = Signatures(keys, nil, "msg_1", 1614265330, body) })
	require.LessOrEqual(t, allocs, float64(signV1Allocs))
}
