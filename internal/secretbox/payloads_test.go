package secretbox

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// memKeys is DataKeys in memory, counting its reads.
type memKeys struct {
	mu    sync.Mutex
	keys  map[uuid.UUID][]byte
	reads int
}

func (m *memKeys) CurrentDataKey(_ context.Context, tenantID uuid.UUID, wrapped []byte) (int32, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if k, ok := m.keys[tenantID]; ok {
		return 1, k, nil
	}
	m.keys[tenantID] = wrapped
	return 1, wrapped, nil
}

func (m *memKeys) DataKey(_ context.Context, tenantID uuid.UUID, version int32) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return m.keys[tenantID], nil
}

func TestPayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type bundle struct {
		box  *Box
		keys *memKeys
		p    *Payloads
	}
	setup := func(t *testing.T) bundle {
		t.Helper()
		box, err := New(bytes.Repeat([]byte{3}, KeySize))
		require.NoError(t, err)
		keys := &memKeys{keys: map[uuid.UUID][]byte{}}
		return bundle{box: box, keys: keys, p: NewPayloads(box, keys, PayloadsConfig{Seal: true, CacheSize: 4})}
	}

	t.Run("SealOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tenant := uuid.New()
		sealed, err := b.p.SealJSON(ctx, tenant, []byte(`{"card":"4242-distinct"}`))
		require.NoError(t, err)
		require.NotContains(t, string(sealed), "4242")
		require.True(t, IsSealedJSON(sealed))
		opened, err := b.p.OpenJSON(ctx, tenant, sealed)
		require.NoError(t, err)
		require.JSONEq(t, `{"card":"4242-distinct"}`, string(opened))

		text, err := b.p.SealText(ctx, tenant, "body-distinct")
		require.NoError(t, err)
		require.NotContains(t, text, "distinct")
		got, err := b.p.OpenText(ctx, tenant, text)
		require.NoError(t, err)
		require.Equal(t, "body-distinct", got)
		require.Equal(t, 1, b.keys.reads, "the data key is read once, then cached")

		_, err = b.p.OpenJSON(ctx, uuid.New(), sealed)
		require.Error(t, err, "another tenant's key must not open it")
	})

	t.Run("ClearPassesThrough", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		clear := []byte(`{"a":"sealed:1:1:x"}`)
		out, err := b.p.OpenJSON(ctx, uuid.New(), clear)
		require.NoError(t, err)
		require.Equal(t, clear, out)
		s, err := b.p.OpenText(ctx, uuid.New(), "sealed:1:1:plain text")
		require.NoError(t, err)
		require.Equal(t, "sealed:1:1:plain text", s)
		require.Zero(t, b.keys.reads)
		var nilP *Payloads
		out, err = nilP.OpenJSON(ctx, uuid.New(), clear)
		require.NoError(t, err)
		require.Equal(t, clear, out)
		require.False(t, nilP.Sealing())
	})

	t.Run("CacheBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 10 {
			_, err := b.p.SealJSON(ctx, uuid.New(), []byte(`{}`))
			require.NoError(t, err)
		}
		require.LessOrEqual(t, len(b.p.cache), 4)
	})

	t.Run("RewrapUnderNewKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tenant := uuid.New()
		sealed, err := b.p.SealJSON(ctx, tenant, []byte(`{"x":1}`))
		require.NoError(t, err)

		newKey := bytes.Repeat([]byte{4}, KeySize)
		during, err := New(newKey, bytes.Repeat([]byte{3}, KeySize))
		require.NoError(t, err)
		to, err := New(newKey)
		require.NoError(t, err)
		rewrapped, done, err := Rewrap(during, to, tenant, b.keys.keys[tenant])
		require.NoError(t, err)
		require.False(t, done)
		_, done, err = Rewrap(during, to, tenant, rewrapped)
		require.NoError(t, err)
		require.True(t, done, "a key wrapped by the new master key is left as it is")
		b.keys.keys[tenant] = rewrapped

		after, err := New(newKey)
		require.NoError(t, err)
		p := NewPayloads(after, b.keys, PayloadsConfig{})
		opened, err := p.OpenJSON(ctx, tenant, sealed)
		require.NoError(t, err, "the old master key is gone, the data key is wrapped by the new one")
		require.JSONEq(t, `{"x":1}`, string(opened))

		old := NewPayloads(b.box, b.keys, PayloadsConfig{})
		_, err = old.OpenJSON(ctx, tenant, sealed)
		require.Error(t, err, "the old master key alone no longer unwraps it")
	})
}

// Sealing and opening sit on the post and dispatch paths of every event of
// a sealing server: each writes its result once, into one buffer, beside
// the nonce and ciphertext sealing makes.
func TestSealAndOpenAllocate(t *testing.T) {
	ctx := context.Background()
	box, err := New(bytes.Repeat([]byte{5}, KeySize))
	require.NoError(t, err)
	p := NewPayloads(box, &memKeys{keys: map[uuid.UUID][]byte{}}, PayloadsConfig{Seal: true})
	tenant := uuid.New()
	doc := bytes.Repeat([]byte(`{"amount": 120, "currency": "eur"}`), 8)
	sealed, err := p.SealJSON(ctx, tenant, doc)
	require.NoError(t, err)

	seals := testing.AllocsPerRun(100, func() {
		if _, err := p.SealJSON(ctx, tenant, doc); err != nil {
			t.Fatal(err)
		}
	})
	opens := testing.AllocsPerRun(100, func() {
		got, err := p.OpenJSON(ctx, tenant, sealed)
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("opened %q, %v", got, err)
		}
	})
	require.LessOrEqual(t, seals, 2.0, "allocations per SealJSON")
	require.LessOrEqual(t, opens, 1.0, "allocations per OpenJSON")
}
