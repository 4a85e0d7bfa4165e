package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// LeaseAPITokens draws from the tenant's API bucket shared by every process
// (apirate.Shared): it pays req.Owed, then grants up to req.Want whole
// tokens of what the bucket holds, in one statement. sending is called
// once a connection is held, just before the first statement is sent, so
// that the caller's lease on the tokens starts before they are granted and
// a wait for a pooled connection does not eat into it. A tenant's first
// call makes its bucket, full.
func (s *Store) LeaseAPITokens(ctx context.Context, tenant uuid.UUID, req apirate.TokenRequest, sending func()) (apirate.TokenGrant, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return apirate.TokenGrant{}, fmt.Errorf("lease api tokens: %w", err)
	}
	defer conn.Release()
	q := dbq.New(conn)
	params := dbq.LeaseAPITokensParams{
		TenantID: tenant, Want: req.Want, Owed: float64(req.Owed),
		Capacity: req.Capacity, PerSecond: req.PerSecond,
	}
	sending()
	row, err := q.LeaseAPITokens(ctx, params)
	if errors.Is(err, pgx.ErrNoRows) {
		err = q.CreateAPIBucket(ctx, dbq.CreateAPIBucketParams{TenantID: tenant, Capacity: req.Capacity})
		if err != nil {
			return apirate.TokenGrant{}, fmt.Errorf("create api bucket: %w", notFound(err))
		}
		row, err = q.LeaseAPITokens(ctx, params)
	}
	if err != nil {
		return apirate.TokenGrant{}, fmt.Errorf("lease api tokens: %w", err)
	}
	return apirate.TokenGrant{Granted: row.Granted, Left: row.Tokens}, nil
}
