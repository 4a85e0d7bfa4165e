package apirate

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Database is the SharedStore that keeps the shared buckets in st's
// api_buckets table.
func Database(st *store.Store) SharedStore { return buckets{st} }

type buckets struct{ st *store.Store }

func (b buckets) LeaseAPITokens(ctx context.Context, tenant uuid.UUID, req TokenRequest, sending func()) (TokenGrant, error) {
	row, err := b.st.LeaseAPITokens(ctx, dbq.LeaseAPITokensParams{
		TenantID: tenant, Want: req.Want, Owed: float64(req.Owed), Capacity: req.Capacity, PerSecond: req.PerSecond,
	}, sending)
	if err != nil {
		return TokenGrant{}, err //nolint:wrapcheck // the store says what failed
	}
	return TokenGrant{Granted: row.Granted, Left: row.Tokens}, nil
}
