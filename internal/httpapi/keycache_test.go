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
	now := time.Now()
	c := newKeyCache(time.Second, 2)
	c.now = func() time.Time { return now }
	cred := sluice.Credential{Tenant: sluice.Tenant{ID: uuid.New()}}
	_, ok := c.get("sk_a")
	require.False(t, ok)
	c.put("sk_a", cred, now)
	got, ok := c.get("sk_a")
	require.True(t, ok)
	require.Equal(t, cred.Tenant.ID, got.Tenant.ID)
	_, ok = c.get("sk_b")
	require.False(t, ok, "another key is not a hit")

	now = now.Add(time.Second)
	_, ok = c.get("sk_a")
	require.False(t, ok, "entries live ttl from the lookup's start")

	// An entry never outlives its key.
	exp := now.Add(100 * time.Millisecond)
	c.put("sk_a", sluice.Credential{Tenant: cred.Tenant, ExpiresAt: &exp}, now)
	_, ok = c.get("sk_a")
	require.True(t, ok)
	now = exp
	_, ok = c.get("sk_a")
	require.False(t, ok, "the key expired")

	c.put("sk_a", cred, now)
	c.put("sk_b", cred, now)
	c.put("sk_c", cred, now)
	require.LessOrEqual(t, len(c.entries), 2, "bounded")
	c.put("sk_a", cred, now)
	require.Len(t, c.entries, 2)
	now = now.Add(2 * time.Second)
	c.put("sk_d", cred, now)
	require.Len(t, c.entries, 1, "expired entries go first")
}
