package eventschema

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dbwait"
)

const invoice = `{"type":"object","required":["amount"],"properties":{
	"amount":{"type":"integer","minimum":0},
	"currency":{"enum":["EUR","USD"]},
	"lines":{"type":"array","items":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}}`

// check validates doc against sch with a request's whole budget.
func check(t *testing.T, sch *Schema, doc string) *Violation {
	t.Helper()
	v, err := sch.Check([]byte(doc), NewBudget(MaxRequestCost))
	require.NoError(t, err)
	return v
}

func TestCheckNamesTheFailingLocation(t *testing.T) {
	t.Parallel()
	sch, err := Compile([]byte(invoice))
	require.NoError(t, err)
	require.Nil(t, check(t, sch, `{"amount":1,"currency":"EUR","lines":[{"sku":"a"}]}`))
	for doc, loc := range map[string]string{
		`{"amount":-1}`:                     "/amount",
		`{"currency":"EUR"}`:                "",
		`{"amount":1,"lines":[{},{"x":1}]}`: "/lines/0",
		`{"amount":1,"currency":"GBP"}`:     "/currency",
	} {
		v := check(t, sch, doc)
		require.NotNil(t, v, doc)
		require.Equal(t, loc, v.Location, doc)
		require.NotEmpty(t, v.Message)
	}
}

func TestCompileRefusesOutsideReferences(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"$ref":"file:///etc/passwd"}`,
		`{"$ref":"http://127.0.0.1:1/x.json"}`,
		`{"properties":{"a":{"$ref":"https://example.com/a.json#/x"}}}`,
	} {
		_, err := Compile([]byte(s))
		require.ErrorContains(t, err, "may not refer to other documents", s)
	}
	_, err := Compile([]byte(`{"$defs":{"p":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/p"}}}`))
	require.NoError(t, err, "references inside the schema work")
	_, err = Compile(make([]byte, MaxSchemaBytes+1))
	require.Error(t, err)
}

// TestCacheReloadsOnlyWhatChanged: a tenant's schemas are read at most once
// a second, recompiled only when their updated_at moved, and re-read at
// once after Forget.
func TestCacheReloadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	tenant := uuid.New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sources := []Source{{Name: "invoice.paid", Schema: []byte(invoice), UpdatedAt: t0}}
	loads := 0
	c := NewCache(func(_ context.Context, id uuid.UUID) ([]Source, error) {
		require.Equal(t, tenant, id)
		loads++
		return sources, nil
	})
	now := t0
	c.now = func() time.Time { return now }

	first, err := c.Schemas(t.Context(), tenant)
	require.NoError(t, err)
	require.NotNil(t, first.For("invoice.paid"))
	require.Nil(t, first.For("other"))

	now = now.Add(999 * time.Millisecond)
	_, err = c.Schemas(t.Context(), tenant)
	require.NoError(t, err)
	require.Equal(t, 1, loads, "within a second: no query")

	now = now.Add(time.Millisecond)
	again, err := c.Schemas(t.Context(), tenant)
	require.NoError(t, err)
	require.Equal(t, 2, loads)
	require.Same(t, first.For("invoice.paid"), again.For("invoice.paid"), "unchanged: not recompiled")

	sources = []Source{{Name: "invoice.paid", Schema: []byte(`{"type":"object"}`), UpdatedAt: t0.Add(time.Hour)}}
	c.Forget(tenant)
	changed, err := c.Schemas(t.Context(), tenant)
	require.NoError(t, err)
	require.Equal(t, 3, loads, "Forget: read again at once")
	require.Nil(t, check(t, changed.For("invoice.paid"), `{"amount":-1}`), "the new schema applies")
	require.NotNil(t, check(t, first.For("invoice.paid"), `{"amount":-1}`), "a Set already handed out never changes")
}

// BenchmarkCheck is the ingest cost of a schema: an invoice-sized payload
// checked against a compiled, cached schema (the lookup included).
func BenchmarkCheck(b *testing.B) {
	tenant := uuid.New()
	c := NewCache(func(context.Context, uuid.UUID) ([]Source, error) {
		return []Source{{Name: "invoice.paid", Schema: []byte(invoice), UpdatedAt: time.Unix(0, 0)}}, nil
	})
	doc := []byte(`{"amount":4200,"currency":"EUR","customer":"cus_42","lines":[{"sku":"a-1","qty":1},{"sku":"b-2","qty":3}],"note":"thanks"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		set, err := c.Schemas(ctx, tenant)
		if err != nil {
			b.Fatal(err)
		}
		if v, err := set.For("invoice.paid").Check(doc, NewBudget(MaxRequestCost)); v != nil || err != nil {
			b.Fatal(v, err)
		}
	}
}

// TestWaitingForALoadIsBounded: while one request's load hangs (the
// database does not answer), another request for the same tenant waits
// for it only within its own bound on waiting for the database.
func TestWaitingForALoadIsBounded(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	cache := NewCache(func(ctx context.Context, _ uuid.UUID) ([]Source, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	tenant := uuid.New()
	first, cancelFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() {
		_, err := cache.Schemas(first, tenant)
		firstDone <- err
	}()
	<-started

	second, stop := dbwait.WithBudget(context.Background(), 50*time.Millisecond)
	defer stop()
	_, err := cache.Schemas(second, tenant)
	require.ErrorIs(t, err, dbwait.ErrTimeout, "the second gives up at its bound")
	require.Empty(t, firstDone, "while the first still waits")
	cancelFirst()
	require.ErrorIs(t, <-firstDone, context.Canceled)
}
