package store

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// EndpointsNeedingDispatchSQL is the sweeper's query, for plan tests.
const EndpointsNeedingDispatchSQL = endpointsNeedingDispatchSQL

// OneShot runs statements on pool alone, with one setting changed for
// each (oneShot), for its tests.
func OneShot(pool *pgxpool.Pool, name, value string) dbq.DBTX {
	return oneShot{pool: pool, settings: [][2]string{{name, value}}}
}

// RecordSettings are the settings the plain record runs with.
var RecordSettings = recordSettings
