package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestPollPagesCutByBytes: five events read through a poll endpoint, the
// first of 11 MiB and four of 3 MiB (incompressible, so stored at their
// size). With a limit of 50 the pages are cut by bytes: the big one alone
// (a page holds one at least), then three (a fourth would take the page
// past sluice.MaxPageBytes), then the last; each next_cursor continues
// after its page's last event, and only what was read past is delivered.
func TestPollPagesCutByBytes(t *testing.T) {
	b := setupPoll(t)
	_, path := b.pollEndpoint()
	var events []string
	for i := range 5 {
		events = append(events, b.post(i))
	}
	for i, id := range events {
		size := 3 << 20
		if i == 0 {
			size = 11 << 20
		}
		raw := make([]byte, size*3/4)
		_, err := rand.Read(raw)
		require.NoError(t, err)
		payload := fmt.Sprintf(`{"n": %d, "blob": "%s"}`, i, base64.StdEncoding.EncodeToString(raw))
		_, err = b.store.Pool().Exec(context.Background(), `UPDATE events SET payload = $2::text::json WHERE id = $1`, id, payload)
		require.NoError(t, err)
	}

	var pages [][]string
	cursor := ""
	for range 10 {
		p := b.read(path, "limit=50&cursor="+cursor)
		if len(p.Data) == 0 {
			break
		}
		size := 0
		for _, d := range p.Data {
			size += len(d.Data)
		}
		if len(p.Data) > 1 {
			require.LessOrEqual(t, size, sluice.MaxPageBytes)
		}
		pages = append(pages, p.ids())
		cursor = p.NextCursor
	}
	require.Equal(t, [][]string{events[:1], events[1:4], events[4:]}, pages)
	for _, e := range events {
		require.Equal(t, "delivered", b.deliveryOfEvent(e)["status"], "read past")
	}
}
