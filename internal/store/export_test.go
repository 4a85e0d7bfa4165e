package store

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// OneShot runs statements on pool alone, with settings (name, value)
// changed for each (oneShot), for its tests.
func OneShot(pool *pgxpool.Pool, settings ...[2]string) dbq.DBTX {
	return newOneShot(pool, settings)
}

// IndexProbeSets are the planner settings of routing and dispatch
// transactions, as session settings for EXPLAIN.
var IndexProbeSets = func() []string {
	var sets []string
	for _, s := range IndexProbes {
		sets = append(sets, "SET "+s[0]+" = "+s[1])
	}
	return sets
}()
