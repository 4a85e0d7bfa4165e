// Migrate brings a database up to date: River's own schema first
// (rivermigrate), then the migrations embedded here (goose). Running it
// again is a no-op, and concurrent runs serialise on an advisory lock.

package db

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Migrate applies every pending migration.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("prepare river migrations: %w", err)
	}
	if _, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}

	migrations, err := fs.Sub(Migrations, "migrations")
	if err != nil {
		return fmt.Errorf("find sluice migrations: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("make migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("prepare sluice migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("sluice migrations: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "applied migration", slog.String("file", r.Source.Path), slog.Duration("took", r.Duration))
	}
	return nil
}
