// Package stmtcount counts the statements a store sends to Postgres, for
// the tests that hold a hot path to a number of statements per delivery
// (a feature that adds one per delivery fails a test, not a benchmark
// weeks later).
package stmtcount

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// Counter counts the statements sent on the pools it traces while it is
// on: each query, each statement of a batch (a oneShot's settings and its
// statement are two), BEGIN and COMMIT alike.
type Counter struct {
	on     atomic.Bool
	mu     sync.Mutex
	counts map[string]int // by name (Name)
}

// Fixture is storetest.Fixture on a pool whose statements c counts; River
// (f.Jobs, and the River client) has a pool of its own, not counted,
// except for what it runs in the store's transactions.
type Fixture struct {
	storetest.Fixture
	Counter *Counter
	// RiverPool is River's own pool, for a client with workers.
	RiverPool *pgxpool.Pool
}

// New builds a Fixture on a new database, dropped when the test ends; the
// counter starts off.
func New(t testing.TB) Fixture {
	t.Helper()
	c := &Counter{counts: map[string]int{}}
	url := pgtest.NewDatabase(t)
	riverPool := newPool(t, url, nil)
	return Fixture{Fixture: storetest.On(t, newPool(t, url, c), riverPool), Counter: c, RiverPool: riverPool}
}

func newPool(t testing.TB, url string, tracer *Counter) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	store.ConfigurePool(cfg) // as the process and pgtest configure theirs
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Start clears the counts and starts counting.
func (c *Counter) Start() {
	c.mu.Lock()
	clear(c.counts)
	c.mu.Unlock()
	c.on.Store(true)
}

// Stop stops counting and returns the counts by statement name.
func (c *Counter) Stop() Counts {
	c.on.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *Counter) count(sql string) {
	if !c.on.Load() {
		return
	}
	c.mu.Lock()
	c.counts[Name(sql)]++
	c.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.count(data.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	c.count(data.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (c *Counter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	c.count("COPY " + data.TableName.Sanitize())
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (c *Counter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

var spaces = regexp.MustCompile(`\s+`)

// Name names a statement: sqlc's name, or its text on one line, cut to
// 80 characters.
func Name(sql string) string {
	q := strings.TrimSpace(spaces.ReplaceAllString(sql, " "))
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	if r := []rune(q); len(r) > 80 {
		q = string(r[:80]) + "…"
	}
	return q
}

// Counts are statements by name.
type Counts map[string]int

// Total is the number of statements.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// String lists the statements, most frequent first.
func (c Counts) String() string {
	names := slices.Collect(maps.Keys(c))
	slices.SortFunc(names, func(a, b string) int {
		if c[a] != c[b] {
			return c[b] - c[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%6d  %s\n", c[n], n)
	}
	return b.String()
}
