package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// DataKeys is the tenant_data_keys table as secretbox.DataKeys.
func DataKeys(st *store.Store) secretbox.DataKeys { return dataKeys{st} }

type dataKeys struct{ st *store.Store }

// firstKeyTries bounds CurrentDataKey's statements when other processes
// store a tenant's first key at the same moment (queries/data_keys.sql).
const firstKeyTries = 3

func (k dataKeys) CurrentDataKey(ctx context.Context, tenantID uuid.UUID, wrapped []byte) (int32, []byte, error) {
	for range firstKeyTries {
		row, err := store.Read(ctx, k.st, (*dbq.Queries).CurrentDataKey, dbq.CurrentDataKeyParams{TenantID: tenantID, Wrapped: wrapped})
		if errors.Is(err, sluice.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("current data key: %w", err)
		}
		return row.Version, row.Wrapped, nil
	}
	return 0, nil, fmt.Errorf("current data key: none after %d tries", firstKeyTries)
}

func (k dataKeys) DataKey(ctx context.Context, tenantID uuid.UUID, version int32) ([]byte, error) {
	wrapped, err := store.Read(ctx, k.st, (*dbq.Queries).DataKey, dbq.DataKeyParams{TenantID: tenantID, Version: version})
	if err != nil {
		return nil, fmt.Errorf("data key %d: %w", version, err)
	}
	return wrapped, nil
}
