package store

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// settled are pools on the store's database whose connections carry
// settings (name, value) from their first message: Postgres takes them in
// the startup message as it takes a user name, so a statement that needs
// them runs alone, with no BEGIN, SET or set_config beside it, and its
// connection never holds anyone else's statement. They are for the
// dispatcher's most frequent statements and transactions (its claims,
// records and steps) and the routed insert, each wanting the generic plan
// or index probes or an asynchronous commit.
type settled struct {
	mu    sync.Mutex
	pools map[string]*pgxpool.Pool
}

// settledConns is the most connections a settled pool opens beside the
// store's pool, whose size it takes a quarter of.
func settledConns(main int32) int32 { return max(4, main/4) }

// pool returns the settled pool for settings, made on first use from the
// store's pool's configuration (hosts, TLS and hooks alike).
func (p *settled) pool(main *pgxpool.Pool, settings [][2]string) *pgxpool.Pool {
	key := settingsKey(settings)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool, ok := p.pools[key]; ok {
		return pool
	}
	cfg := main.Config()
	cfg.MaxConns = settledConns(cfg.MaxConns)
	cfg.MinConns = 0
	for _, s := range settings {
		cfg.ConnConfig.RuntimeParams[s[0]] = s[1]
	}
	// A copy of a working pool's configuration with a smaller size is
	// valid, and a pool connects only when first used.
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		panic(fmt.Sprintf("store: settled pool: %v", err))
	}
	if p.pools == nil {
		p.pools = map[string]*pgxpool.Pool{}
	}
	p.pools[key] = pool
	return pool
}

func (p *settled) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pool := range p.pools {
		pool.Close()
	}
	p.pools = nil
}

func settingsKey(settings [][2]string) string {
	var b strings.Builder
	for _, s := range settings {
		b.WriteString(s[0] + "=" + s[1] + ";")
	}
	return b.String()
}

// OneShot returns the generated statements, each run alone on a pool whose
// connections carry settings (see settled); with no settings, on the
// store's pool.
func (s *Store) OneShot(settings [][2]string) *dbq.Queries { return dbq.New(s.poolWith(settings)) }

// BehindPooler says the store's pool reaches Postgres through a pooler in
// transaction mode, which passes no settings in a connection's startup
// message: then there are no settled pools, a step sets its settings for
// its transaction (BeginStep), and a statement run alone (OneShot) runs
// without them. Call it before the store is used.
func (s *Store) BehindPooler() { s.pooled = true }

// poolWith is the settled pool for settings, or with none (or behind a
// pooler) the store's.
func (s *Store) poolWith(settings [][2]string) *pgxpool.Pool {
	if len(settings) == 0 || s.pooled {
		return s.pool
	}
	return s.settled.pool(s.pool, settings)
}

// Close closes the settled pools; the store's pool is its owner's to close.
func (s *Store) Close() { s.settled.close() }
