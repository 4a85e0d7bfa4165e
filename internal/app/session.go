package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/store"
)

// sessions is where what needs a session of its own connects: the
// dispatch leases (session advisory locks on a held connection), the
// Nudger's listener and River's (LISTEN). With SLUICE_DATABASE_SESSION_URL
// set that is straight to Postgres, and DATABASE_URL may be a pooler in
// transaction mode, which hands each transaction to whichever server
// connection is free; unset, it is DATABASE_URL, as for everything else.
type sessions struct {
	conn *pgx.ConnConfig // the leases' and the Nudger listener's connections
	// listen is the pool River's listener holds its one connection from;
	// nil means River's own pool.
	listen *pgxpool.Pool
}

// openSessions returns the sessions for cfg beside pool, the process's
// pool on DATABASE_URL. It connects nothing yet.
func openSessions(ctx context.Context, cfg config.Config, pool *pgxpool.Pool) (*sessions, error) {
	if cfg.DatabaseSessionURL == "" {
		return &sessions{conn: pool.Config().ConnConfig}, nil
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseSessionURL)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_DATABASE_SESSION_URL: %w", err)
	}
	store.ConfigurePool(pcfg)
	configurePool(pcfg, cfg, strandedByReplication) // its sockets are not cut: the listener reconnects on its own
	// River's listener holds one connection, and gives it back (closed)
	// before it connects again.
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	listen, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open session pool: %w", err)
	}
	return &sessions{conn: pcfg.ConnConfig, listen: listen}, nil
}

// driver is River's driver on pool, listening over the session's
// connection when that is apart.
func (s *sessions) driver(pool *pgxpool.Pool) riverdriver.Driver[pgx.Tx] {
	if s.listen == nil {
		return riverpgxv5.New(pool)
	}
	return listenApart{Driver: riverpgxv5.New(pool), listen: riverpgxv5.New(s.listen)}
}

func (s *sessions) close() {
	if s != nil && s.listen != nil {
		s.listen.Close()
	}
}

// listenApart is River's driver with its listener on a pool of its own:
// everything else River does is a transaction or a statement alone, which
// a pooler in transaction mode carries.
type listenApart struct {
	*riverpgxv5.Driver
	listen *riverpgxv5.Driver
}

func (d listenApart) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	return d.listen.GetListener(params)
}

// behindPooler sets up pcfg, DATABASE_URL's pool, for a pooler in
// transaction mode when the session goes apart: no statement outlives its
// transaction, so pgx's named prepared statements, which a pooler before
// PgBouncer 1.21 (Debian 12 has 1.18) loses between transactions, give
// way to cached descriptions and unnamed statements, one round trip each,
// unless the URL chose its own default_query_exec_mode.
func behindPooler(pcfg *pgxpool.Config, cfg config.Config) {
	if cfg.DatabaseSessionURL == "" || strings.Contains(cfg.DatabaseURL, "default_query_exec_mode") {
		return
	}
	pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
}
