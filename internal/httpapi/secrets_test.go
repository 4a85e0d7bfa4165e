package httpapi_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestNoPlaintextSecretsAtRest creates keys and secrets (rotating one, so
// both a current and a previous secret are stored), then reads every row of
// every table as text and checks no key or secret appears in it, nor the
// random part of one, nor its bytes as bytea prints them.
func TestNoPlaintextSecretsAtRest(t *testing.T) {
	b := setup(t)
	ep := b.createEndpoint(b.keyA, nil)
	id := ep["id"].(string)
	rotated := b.do(b.keyA, http.MethodPost, "/v1/endpoints/"+id+"/secret/rotate", nil).JSON(t)
	k2 := sluice.NewAPIKey{Key: apikey.New()}
	_, err := b.store.CreateAPIKey(t.Context(), b.tenantB.ID, sluice.NewAPIKeyParams{Name: "second"}, apikey.Digest(k2.Key))
	require.NoError(t, err)
	key2 := k2.Key

	needles := []string{b.keyA, b.keyB, key2, ep["secret"].(string), rotated["secret"].(string)}
	for _, n := range append([]string(nil), needles...) {
		needles = append(needles, n[strings.Index(n, "_")+1:])   // without the prefix
		needles = append(needles, hex.EncodeToString([]byte(n))) // as bytea shows it
	}

	ctx := t.Context()
	pool := b.store.Pool()
	rows, err := pool.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname = 'public'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "public.endpoints")
	require.Contains(t, tables, "public.api_keys")

	scanned := 0
	for _, table := range tables {
		rows, err := pool.Query(ctx, `SELECT t::text FROM `+table+` t`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, text := range texts {
			scanned++
			for _, n := range needles {
				require.NotContains(t, text, n, "plaintext secret in %s", table)
			}
		}
	}
	require.Greater(t, scanned, 5)
}
