package send_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/send"
)

// TestBodyInParts sends a body given in parts (a shared payload between its
// envelope's head and tail) and checks that the receiver gets exactly the
// parts joined, with its length, signed (v1 and v1a) as that body would be
// if it were given whole.
func TestBodyInParts(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strconv.FormatInt(r.ContentLength, 10))
	})
	secret := send.NewSecret()
	key, err := send.Key(secret)
	require.NoError(t, err)
	signing := send.NewSigningKey()

	payload := bytes.Repeat([]byte(`{"blob":"0123456789abcdef"},`), 40_000)
	payload = append(append([]byte(`[`), payload...), []byte(`{}]`)...)
	head, tail := []byte(`{"id":"evt_1","type":"big.one","timestamp":"2026-01-01T00:00:00Z","data":`), []byte(`}`)
	whole := bytes.Join([][]byte{head, payload, tail}, nil)
	ts := time.Unix(1_800_000_000, 0)

	res := devSender(0).Send(context.Background(), send.Message{
		URL: rec.srv.URL, ID: "evt_1", Timestamp: ts, Parts: [][]byte{head, payload, tail},
		Keys: [][]byte{key}, SigningKeys: []ed25519.PrivateKey{signing},
	})
	require.True(t, res.Delivered(), res.Err)
	require.Equal(t, strconv.Itoa(len(whole)), res.Body, "the Content-Length the receiver saw")

	got := rec.last(t)
	require.Equal(t, whole, got.body, "the parts, one after another")
	require.Equal(t, send.Signatures([][]byte{key}, []ed25519.PrivateKey{signing}, "evt_1", ts.Unix(), whole),
		got.header.Get("Webhook-Signature"), "signed as the whole body")
	wh, err := standardwebhooks.NewWebhookRaw(key)
	require.NoError(t, err)
	require.Error(t, wh.Verify(got.body, got.header), "too old a timestamp for the library's tolerance")
	require.NoError(t, wh.VerifyIgnoringTimestamp(got.body, got.header), "v1 verifies over the whole body")
	v1a := got.header.Get("Webhook-Signature")[strings.LastIndex(got.header.Get("Webhook-Signature"), "v1a,")+len("v1a,"):]
	sig, err := base64.StdEncoding.DecodeString(v1a)
	require.NoError(t, err)
	require.True(t, ed25519.Verify(signing.Public().(ed25519.PublicKey), send.SignedContent("evt_1", ts.Unix(), whole), sig),
		"v1a verifies over the whole body")
}
