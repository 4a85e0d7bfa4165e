package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPaginationWalksEveryItemOnce walks lists page by page and checks each
// item appears exactly once, newest first, with no page beyond the last.
func TestPaginationWalksEveryItemOnce(t *testing.T) {
	b := setup(t)
	var created []string
	for range 7 {
		id := b.createEndpoint(b.keyA, nil)["id"].(string)
		created = append(created, id)
		r := b.do(b.keyA, http.MethodPost, "/v1/subscriptions", map[string]any{"endpoint_id": id, "event_types": []string{"*"}})
		require.Equal(t, http.StatusCreated, r.Status)
	}
	b.createEndpoint(b.keyB, nil) // another tenant's endpoint must not appear

	for _, limit := range []string{"1", "3", "7", "500"} {
		for _, list := range []string{"/v1/endpoints", "/v1/subscriptions"} {
			seen := map[string]bool{}
			var order []string
			cursor, pages := "", 0
			for {
				path := list + "?limit=" + limit
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				page := b.do(b.keyA, http.MethodGet, path, nil).JSON(t)
				pages++
				require.Less(t, pages, 10, "pagination does not end")
				for _, item := range page["data"].([]any) {
					id := item.(map[string]any)["id"].(string)
					require.False(t, seen[id], "%s listed twice", id)
					seen[id] = true
					order = append(order, id)
				}
				if page["next_cursor"] == nil {
					break
				}
				cursor = page["next_cursor"].(string)
			}
			require.Len(t, seen, 7, "%s limit %s", list, limit)
			if list == "/v1/endpoints" {
				for i, id := range order {
					require.Equal(t, created[len(created)-1-i], id, "newest first")
				}
			}
		}
	}
}
