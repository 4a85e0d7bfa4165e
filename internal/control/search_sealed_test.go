package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestEventsFilterSealed: sixty events, newest first n = 0…59, all sealed
// but every tenth; searching n ≥ 50 three at a time, Postgres lets every
// sealed row through and control matches them: the pages, read on past
// the rows left out and cut short (with a cursor) after ten statements,
// give exactly the ten matches in order, and never more than the limit.
func TestEventsFilterSealed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	box, err := secretbox.New(bytes.Repeat([]byte{1}, secretbox.KeySize))
	require.NoError(t, err)
	pl := secretbox.NewPayloads(box, app.DataKeys(b.f.Store), secretbox.PayloadsConfig{Seal: true})
	b.f.Store.SealPayloads(pl)
	t0 := time.Now().UTC().Truncate(time.Second)
	for n := range 60 {
		payload := fmt.Appendf(nil, `{"n": %d}`, n)
		if n%10 != 0 {
			payload, err = pl.SealJSON(ctx, b.owner.Tenant, payload)
			require.NoError(t, err)
		}
		_, err = b.f.Store.Pool().Exec(ctx, `INSERT INTO events (id, tenant_id, type, payload, created_at)
			VALUES (sluice_uuidv7(), $1, 'order.created', $2::text::json, $3)`,
			b.owner.Tenant, string(payload), t0.Add(-time.Duration(n)*time.Minute))
		require.NoError(t, err)
	}

	all, err := b.ctl.Events(ctx, b.owner, sluice.EventFilter{}, sluice.PageParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, all.Items, 60)
	require.JSONEq(t, `{"n": 1}`, string(all.Items[1].Payload), "a sealed payload is read opened")
	require.JSONEq(t, `{"n": 10}`, string(all.Items[10].Payload), "a clear one as it is")

	filter := `{"n": {"$gte": 50}}`
	var (
		found []int
		after *uuid.UUID
		short int
	)
	for range 20 {
		page, err := b.ctl.Events(ctx, b.owner, sluice.EventFilter{Filter: &filter}, sluice.PageParams{Limit: 3, After: after})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 3)
		for _, ev := range page.Items {
			var doc struct{ N int }
			require.NoError(t, json.Unmarshal(ev.Payload, &doc))
			found = append(found, doc.N)
		}
		if page.Next == nil {
			break
		}
		if len(page.Items) < 3 {
			short++
		}
		after = page.Next
	}
	require.Equal(t, []int{50, 51, 52, 53, 54, 55, 56, 57, 58, 59}, found)
	require.Positive(t, short, "a page cut short after ten statements carries its cursor")
}
