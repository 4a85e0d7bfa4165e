// Package pgtest gives each test its own freshly migrated database on the
// Postgres server named by DATABASE_URL (`make test` starts a throwaway
// cluster and sets it). A template database is migrated once per test
// binary; each test clones it, which takes milliseconds, and drops its clone
// when it ends.
package pgtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/db"
	"github.com/sluice-dev/sluice/internal/store"
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// URL returns DATABASE_URL and fails the test when it is unset: these tests
// are never silently skipped.
func URL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway Postgres")
	}
	return dsn
}

// NewDatabase creates a migrated database for this test and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	serverURL := URL(t)
	templateOnce.Do(func() { templateName, templateErr = makeTemplate(ctx, serverURL) })
	if templateErr != nil {
		t.Fatalf("pgtest: template database: %v", templateErr)
	}

	name := "sluice_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), serverURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDatabase(t, serverURL, name)
}

// NewPool creates a migrated database for this test and returns a pool on
// it, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabase(t))
	if err != nil {
		t.Fatalf("pgtest: pool config: %v", err)
	}
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func makeTemplate(ctx context.Context, serverURL string) (string, error) {
	name := fmt.Sprintf("sluice_tpl_%d_%d", os.Getpid(), time.Now().UnixNano())
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("connect to server: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create template database: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	cfg.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("open template pool: %w", err)
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return name, db.Migrate(ctx, pool, logger)
}

func withDatabase(t testing.TB, serverURL, name string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("pgtest: parse DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
