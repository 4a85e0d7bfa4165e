package config

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPayloadEncryption(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	prev := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_ENCRYPTION_KEY": key}), true)
	require.NoError(t, err)
	require.False(t, c.PayloadEncryption, "off by default")
	require.Nil(t, c.PreviousEncryptionKey)

	for _, v := range []string{"on", "ON", "true", "1"} {
		c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_ENCRYPTION_KEY": key,
			"SLUICE_PAYLOAD_ENCRYPTION": v, "SLUICE_PREVIOUS_ENCRYPTION_KEY": prev}), true)
		require.NoError(t, err, v)
		require.True(t, c.PayloadEncryption, v)
		require.Equal(t, bytes.Repeat([]byte{2}, 32), c.PreviousEncryptionKey)
	}
	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_PAYLOAD_ENCRYPTION": "off"}), false)
	require.NoError(t, err)
	require.False(t, c.PayloadEncryption)

	_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_PAYLOAD_ENCRYPTION": "maybe",
		"SLUICE_PREVIOUS_ENCRYPTION_KEY": "short"}), false)
	require.ErrorContains(t, err, "SLUICE_PAYLOAD_ENCRYPTION")
	require.ErrorContains(t, err, "SLUICE_PREVIOUS_ENCRYPTION_KEY")
}
