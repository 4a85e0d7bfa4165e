package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// LeaseAPITokens draws from the tenant's API bucket shared by every
// process: it pays p.Owed, then grants up to p.Want whole tokens of what
// the bucket holds, in one statement (api_buckets.sql). sending is called
// once a connection is held, just before the first statement is sent, so
// that the caller's lease on the tokens starts before they are granted and
// a wait for a pooled connection does not eat into it. A tenant's first
// call makes its bucket, full.
func (s *Store) LeaseAPITokens(ctx context.Context, p dbq.LeaseAPITokensParams, sending func()) (dbq.LeaseAPITokensRow, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return dbq.LeaseAPITokensRow{}, fmt.Errorf("lease api tokens: %w", err)
	}
	defer conn.Release()
	q := dbq.New(conn)
	sending()
	row, err := q.LeaseAPITokens(ctx, p)
	if errors.Is(err, pgx.ErrNoRows) {
		err = q.CreateAPIBucket(ctx, dbq.CreateAPIBucketParams{TenantID: p.TenantID, Capacity: p.Capacity})
		if err != nil {
			return dbq.LeaseAPITokensRow{}, fmt.Errorf("create api bucket: %w", NotFound(err))
		}
		row, err = q.LeaseAPITokens(ctx, p)
	}
	if err != nil {
		return dbq.LeaseAPITokensRow{}, fmt.Errorf("lease api tokens: %w", err)
	}
	return row, nil
}
