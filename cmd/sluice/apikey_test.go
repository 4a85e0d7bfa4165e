package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// listKeys runs `apikey list` and decodes its one line of JSON.
func listKeys(t *testing.T, tenant uuid.UUID) []sluice.APIKey {
	t.Helper()
	out, err := runCmd(t, "apikey", "list", "--tenant", tenant.String())
	require.NoError(t, err)
	var got struct {
		APIKeys []sluice.APIKey `json:"api_keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	return got.APIKeys
}

func TestAPIKeyListRevoke(t *testing.T) {
	st := useDatabase(t)
	id, first := createTenant(t, "Acme", "ops@acme.example")
	otherID, _ := createTenant(t, "Globex", "ops@globex.example")
	out, err := runCmd(t, "apikey", "create", "--tenant", id.String(), "--name", "ci")
	require.NoError(t, err)
	second := decodeExact(t, out, "api_key")["api_key"]

	// Listed newest first, by name and prefix, never the keys themselves.
	out, err = runCmd(t, "apikey", "list", "--tenant", id.String())
	require.NoError(t, err)
	require.NotContains(t, out, first)
	require.NotContains(t, out, second)
	keys := listKeys(t, id)
	require.Len(t, keys, 2)
	require.Equal(t, "ci", keys[0].Name)
	require.Equal(t, second[:7], keys[0].Prefix)
	require.Equal(t, "default", keys[1].Name)
	require.Len(t, listKeys(t, otherID), 1, "only the tenant's own keys")

	// Revoke the second: it stops authenticating, the first still works.
	out, err = runCmd(t, "apikey", "revoke", "--id", keys[0].ID.String())
	require.NoError(t, err)
	got := decodeExact(t, out, "revoked", "tenant_id", "prefix")
	require.Equal(t, keys[0].ID.String(), got["revoked"])
	require.Equal(t, id.String(), got["tenant_id"])
	_, err = st.AuthenticateAPIKey(context.Background(), apikey.Hash(second))
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = st.AuthenticateAPIKey(context.Background(), apikey.Hash(first))
	require.NoError(t, err)
	require.Len(t, listKeys(t, id), 1)

	// Revoking again, or an unknown id, is not found; bad flags fail.
	out, err = runCmd(t, "apikey", "revoke", "--id", keys[0].ID.String())
	require.ErrorIs(t, err, sluice.ErrNotFound)
	require.Empty(t, out)
	for name, args := range map[string][]string{
		"list unknown tenant": {"list", "--tenant", uuid.NewString()},
		"list malformed":      {"list", "--tenant", "acme"},
		"list no tenant":      {"list"},
		"revoke malformed":    {"revoke", "--id", "x"},
		"revoke no id":        {"revoke"},
		"create long name":    {"create", "--tenant", id.String(), "--name", string(make([]byte, 101))},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCmd(t, append([]string{"apikey"}, args...)...)
			require.Error(t, err)
			require.Empty(t, out)
		})
	}
}
