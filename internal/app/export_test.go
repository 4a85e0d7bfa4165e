package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/config"
)

// NewProbes lets the external tests reach the probes of a process without
// the API role.
var NewProbes = newProbes

// WatchLeader opens a pool on cfg whose check for a primary left behind
// is stranded, and runs its leader watch every interval until the test
// ends; each reset of the pool is sent on the returned channel.
func WatchLeader(t *testing.T, cfg config.Config, stranded func(context.Context, *pgconn.PgConn) (bool, error),
	interval time.Duration) (*pgxpool.Pool, <-chan struct{}) {
	t.Helper()
	pool, conns, err := openPool(context.Background(), cfg, stranded)
	require.NoError(t, err)
	resets := make(chan struct{}, 100)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderWatch{pool: pool, stranded: stranded, interval: interval, timeout: cfg.DBTimeout, conns: conns,
			logger: slog.New(slog.DiscardHandler), reset: func() { resets <- struct{}{} }}.run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
		pool.Close()
	})
	return pool, resets
}

// StrandedByReplication is the check of a real server.
var StrandedByReplication = strandedByReplication

// LeaderState is what the check reads of a server; IsStranded judges it,
// ParseLeaderState reads it from the check's row.
type LeaderState = leaderState

var (
	IsStranded       = isStranded
	ParseLeaderState = parseLeaderState
)
