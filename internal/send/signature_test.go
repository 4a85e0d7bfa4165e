package send

import (
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
