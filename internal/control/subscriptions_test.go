package control_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()
	ep := b.create(t, b.owner, control.EndpointInput{}).Endpoint
	mine := b.create(t, b.portal, control.EndpointInput{}).Endpoint
	in := control.SubscriptionInput{Patterns: []string{"order.*"}, Filter: json.RawMessage(`{"total":{"$gte":100}}`)}

	_, err := b.ctl.CreateSubscription(ctx, b.viewer, ep.ID, in)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.CreateSubscription(ctx, b.other, ep.ID, in)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's endpoint")
	_, err = b.ctl.CreateSubscription(ctx, b.owner, uuid.New(), control.SubscriptionInput{})
	require.Equal(t, []string{"event_types"}, fields(t, err), "refused before the endpoint is looked up")
	_, err = b.ctl.CreateSubscription(ctx, b.owner, ep.ID, control.SubscriptionInput{
		Patterns: []string{"a.*.b"}, Filter: json.RawMessage(`{"$or":[{"a":1},{"total":{"$gt":true}}]}`)})
	require.Equal(t, []string{"event_types", "filter.$or[1].total.$gt"}, fields(t, err))
	require.Len(t, b.auditLog(t, b.owner), 2, "the endpoints' creation only: a refused change records nothing")

	sub, err := b.ctl.CreateSubscription(ctx, b.owner, ep.ID, in)
	require.NoError(t, err)
	require.Equal(t, ep.ID, sub.EndpointID)
	require.JSONEq(t, `{"total":{"$gte":100}}`, string(sub.Filter))
	var path string
	require.NoError(t, b.f.Store.Pool().QueryRow(ctx, `SELECT filter_path FROM subscriptions WHERE id = $1`, sub.ID).Scan(&path))
	require.NotEmpty(t, path, "stored with its compiled path, which routing evaluates")
	log := b.auditLog(t, b.owner)
	require.Len(t, log, 3)
	require.Equal(t, string(control.SubscriptionCreated), log[0].Action)
	require.Equal(t, sub.ID.String(), *log[0].ObjectID)

	// Reads in scope: a portal caller sees its endpoints' only.
	got, err := b.ctl.Subscription(ctx, b.owner, sub.ID)
	require.NoError(t, err)
	require.Equal(t, sub.ID, got.ID)
	_, err = b.ctl.Subscription(ctx, b.portal, sub.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.Subscription(ctx, b.other, sub.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	page, err := b.ctl.Subscriptions(ctx, b.owner, nil, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	_, err = b.ctl.Subscriptions(ctx, b.portal, nil, sluice.PageParams{Limit: 10})
	require.Equal(t, []string{"endpoint_id"}, fields(t, err), "a portal caller names its endpoint")
	_, err = b.ctl.Subscriptions(ctx, b.portal, &ep.ID, sluice.PageParams{Limit: 10})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	page, err = b.ctl.Subscriptions(ctx, b.portal, &mine.ID, sluice.PageParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Items)

	require.ErrorIs(t, b.ctl.DeleteSubscription(ctx, b.viewer, sub.ID), sluice.ErrForbidden)
	require.ErrorIs(t, b.ctl.DeleteSubscription(ctx, b.portal, sub.ID), sluice.ErrNotFound)
	require.NoError(t, b.ctl.DeleteSubscription(ctx, b.owner, sub.ID))
	_, err = b.ctl.Subscription(ctx, b.owner, sub.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound)
	log = b.auditLog(t, b.owner)
	require.Equal(t, string(control.SubscriptionDeleted), log[0].Action)
	require.Equal(t, sub.ID.String(), *log[0].ObjectID)
}
