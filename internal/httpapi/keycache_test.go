package httpapi

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestKeyCache(t *testing.T) {
	t.Parallel()
	c := newKeyCache(50*time.Millisecond, 2)
	tenant := sluice.Tenant{ID: uuid.New()}
	_, ok := c.get("sk_a")
	require.False(t, ok)
	c.put("sk_a", tenant)
	got, ok := c.get("sk_a")
	require.True(t, ok)
	require.Equal(t, tenant.ID, got.ID)
	_, ok = c.get("sk_b")
	require.False(t, ok, "another key is not a hit")

	time.Sleep(60 * time.Millisecond)
	_, ok = c.get("sk_a")
	require.False(t, ok, "entries expire")

	c.put("sk_a", tenant)
	c.put("sk_b", tenant)
	c.put("sk_c", tenant)
	require.LessOrEqual(t, len(c.entries), 2, "bounded")
}
