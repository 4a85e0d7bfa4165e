package control_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// bigPayload is a JSON object of about size bytes that Postgres cannot
// compress (random base64), so that it is stored at its size.
func bigPayload(t *testing.T, n, size int) []byte {
	t.Helper()
	raw := make([]byte, size*3/4)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	return fmt.Appendf(nil, `{"n": %d, "blob": "%s"}`, n, base64.StdEncoding.EncodeToString(raw))
}

// TestEventsPagesCutByBytes: an 11 MiB event, the newest, then five of
// 3 MiB. With a limit of 50, the pages are cut by bytes instead: the big
// one alone (a page holds one event at least), then three (9 MiB; a
// fourth would pass sluice.MaxPageBytes), then the last two, each with the
// cursor continuing after its last event; every event once, in order. The
// statement itself leaves out the payloads past the bound, so they are
// never read into the process.
func TestEventsPagesCutByBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	var ids []uuid.UUID // newest first
	for n := range 6 {
		size := 3 << 20
		if n == 0 {
			size = 11 << 20
		}
		var id uuid.UUID
		require.NoError(t, b.f.Store.Pool().QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload, created_at)
			VALUES (sluice_uuidv7(), $1, 'blob.stored', $2::text::json, $3) RETURNING id`,
			b.owner.Tenant, string(bigPayload(t, n, size)), t0.Add(-time.Duration(n)*time.Minute)).Scan(&id))
		ids = append(ids, id)
	}
	var stored int
	require.NoError(t, b.f.Store.Pool().QueryRow(ctx, `SELECT pg_column_size(payload) FROM events WHERE id = $1`, ids[1]).Scan(&stored))
	require.Greater(t, stored, 3<<20*9/10, "stored about at its size")

	var (
		pages [][]uuid.UUID
		after *uuid.UUID
	)
	for range 10 {
		page, err := b.ctl.Events(ctx, b.owner, sluice.EventFilter{}, sluice.PageParams{Limit: 50, After: after})
		require.NoError(t, err)
		var got []uuid.UUID
		size := 0
		for _, ev := range page.Items {
			got = append(got, ev.ID)
			size += len(ev.Payload)
			require.NotEmpty(t, ev.Payload)
		}
		if len(got) > 1 {
			require.LessOrEqual(t, size, sluice.MaxPageBytes)
		}
		pages = append(pages, got)
		if page.Next == nil {
			break
		}
		require.Equal(t, got[len(got)-1], *page.Next, "the cursor continues after the page's last event")
		after = page.Next
	}
	require.Equal(t, [][]uuid.UUID{ids[:1], ids[1:4], ids[4:]}, pages)

	rows, err := store.Read(ctx, b.f.Store, (*dbq.Queries).ListEvents, dbq.ListEventsParams{
		TenantID: b.owner.Tenant, After: &ids[0], MaxRows: 10, MaxBytes: sluice.MaxPageBytes,
	})
	require.NoError(t, err)
	require.Len(t, rows, 5)
	for i, r := range rows {
		if i < 3 {
			require.NotNil(t, r.Payload, "row %d", i)
		} else {
			require.Nil(t, r.Payload, "row %d: past the bound, not read", i)
		}
	}
}
