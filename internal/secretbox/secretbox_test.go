package secretbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, KeySize)
	box, err := New(key)
	require.NoError(t, err)

	sealed := box.Seal([]byte("whsec_abc"))
	require.NotContains(t, string(sealed), "whsec_abc")
	require.NotEqual(t, sealed, box.Seal([]byte("whsec_abc")), "nonces must differ")

	opened, err := box.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, "whsec_abc", string(opened))

	other, err := New(bytes.Repeat([]byte{8}, KeySize))
	require.NoError(t, err)
	_, err = other.Open(sealed)
	require.Error(t, err, "a different key must not open the box")

	sealed[len(sealed)-1] ^= 1
	_, err = box.Open(sealed)
	require.Error(t, err, "tampering must be detected")
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{0xab}, KeySize)
	for _, s := range []string{
		base64.StdEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key),
		hex.EncodeToString(key),
		" " + hex.EncodeToString(key) + "\n",
	} {
		got, err := ParseKey(s)
		require.NoError(t, err, s)
		require.Equal(t, key, got)
	}
	_, err := ParseKey("c2hvcnQ=")
	require.Error(t, err)
}
