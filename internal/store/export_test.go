package store

import (
	"github.com/jackc/pgx/v5/pgxpool"
)

// IndexProbeSets are the planner settings of routing and dispatch
// transactions, as session settings for EXPLAIN.
var IndexProbeSets = func() []string {
	var sets []string
	for _, s := range IndexProbes {
		sets = append(sets, "SET "+s[0]+" = "+s[1])
	}
	return sets
}()

// PoolWith is the pool OneShot(settings) runs on, for its tests.
func (s *Store) PoolWith(settings [][2]string) *pgxpool.Pool { return s.poolWith(settings) }

// RoutedPool is the pool Routed runs on.
func (s *Store) RoutedPool() *pgxpool.Pool { return s.poolWith(routedSettings) }
