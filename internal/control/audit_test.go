package control_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestAuditLog: reading the log is a guarded read an admin may make and a
// viewer may not; each tenant reads its own.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.ctl.PutConsumer(ctx, b.owner, "cus_1", control.ConsumerInput{})
	require.NoError(t, err)

	_, err = b.ctl.AuditLog(ctx, b.viewer, sluice.AuditFilter{}, sluice.PageParams{Limit: 10})
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.AuditLog(ctx, b.portalOf("cus_1"), sluice.AuditFilter{}, sluice.PageParams{Limit: 10})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	page, err := b.ctl.AuditLog(ctx, b.admin(), sluice.AuditFilter{Action: string(control.ConsumerCreated)}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	page, err = b.ctl.AuditLog(ctx, b.other, sluice.AuditFilter{}, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Items, "another tenant's log")
}
