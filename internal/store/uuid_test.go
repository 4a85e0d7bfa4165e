package store_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// TestUUIDsScanNatively: ids read back through the pool's own UUID
// codec come out as they went in, alone, nullable and in arrays, in both
// of pgx's formats; a NULL is the zero UUID, as uuid.UUID.Scan has it.
func TestUUIDsScanNatively(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	id := uuid.Must(uuid.NewV7())
	for _, sql := range []string{
		"SELECT $1::uuid, NULL::uuid, $1::uuid, ARRAY[$1::uuid, $1::uuid], NULL::uuid",                                                                          // extended protocol, binary
		"-- simple protocol, text\nSELECT '" + id.String() + "'::uuid, NULL::uuid, '" + id.String() + "'::uuid, ARRAY['" + id.String() + "'::uuid], NULL::uuid", // text
	} {
		var (
			got, null   uuid.UUID
			ptr, nilPtr *uuid.UUID
			arr         []uuid.UUID
		)
		args := []any{id}
		if sql[0] == '-' {
			args = []any{pgx.QueryExecModeSimpleProtocol}
		}
		require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&got, &null, &ptr, &arr, &nilPtr))
		require.Equal(t, id, got)
		require.Equal(t, uuid.Nil, null)
		require.Equal(t, &id, ptr)
		require.Nil(t, nilPtr)
		require.Equal(t, id, arr[0])
	}
	var nullable uuid.NullUUID
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT $1::uuid", id).Scan(&nullable))
	require.Equal(t, uuid.NullUUID{UUID: id, Valid: true}, nullable)
}
