package control_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestEndpointVerification: an endpoint is challenged when it is created
// so, when verification is turned on, when its URL changes and when asked
// again; turning verification off lets its deliveries go.
func TestEndpointVerification(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	ctx := context.Background()

	ep := b.create(t, b.owner, control.EndpointInput{Options: options("verification", `"challenge"`)}).Endpoint
	require.Equal(t, sluice.EndpointUnverified, ep.Status)
	require.Equal(t, []uuid.UUID{ep.ID}, b.nudges.verified, "challenged on create")

	_, err := b.ctl.VerifyEndpoint(ctx, b.viewer, ep.ID)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	_, err = b.ctl.VerifyEndpoint(ctx, b.other, ep.ID)
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's endpoint")
	got, err := b.ctl.VerifyEndpoint(ctx, b.owner, ep.ID)
	require.NoError(t, err)
	require.Equal(t, sluice.EndpointUnverified, got.Status)
	require.Len(t, b.nudges.verified, 2, "challenged again when asked")
	log := b.auditLog(t, b.owner)
	require.Equal(t, string(control.EndpointVerifyAsked), log[0].Action)
	require.Equal(t, ep.ID.String(), *log[0].ObjectID)

	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Description: new("same URL")})
	require.NoError(t, err)
	require.Len(t, b.nudges.verified, 2, "a change that keeps the URL asks nothing")
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{URL: new("http://127.0.0.1:9/moved")})
	require.NoError(t, err)
	require.Len(t, b.nudges.verified, 3, "a new URL is challenged")

	// Off: nothing to prove any more, and its run starts.
	got, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("verification", `"none"`)})
	require.NoError(t, err)
	require.Equal(t, sluice.EndpointActive, got.Status)
	require.Contains(t, b.nudges.unparked, ep.ID)
	_, err = b.ctl.VerifyEndpoint(ctx, b.owner, ep.ID)
	require.ErrorIs(t, err, sluice.ErrConflict, "nothing to verify")

	// A poll endpoint has no URL to challenge.
	_, err = b.ctl.CreateEndpoint(ctx, b.owner, control.EndpointInput{Delivery: new(sluice.DeliveryPoll),
		Options: options("verification", `"challenge"`)})
	require.Equal(t, []string{"verification"}, fields(t, err))
	_, err = b.ctl.UpdateEndpoint(ctx, b.owner, ep.ID, control.EndpointInput{Options: options("verification", `"always"`)})
	require.Equal(t, []string{"verification"}, fields(t, err))
}
