package control_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// TestPutEventType: a viewer changes nothing, Sluice's own types are
// refused, a schema the example does not satisfy is refused; the first
// put creates, the next updates naming what it changed, and the tenant's
// schemas are reloaded at once.
func TestPutEventType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := control.EventTypeInput{Description: "An order", Schema: json.RawMessage(`{"required": ["id"]}`)}

	_, _, err := b.ctl.PutEventType(ctx, b.viewer, "order.created", in)
	require.ErrorIs(t, err, sluice.ErrForbidden)
	var v *sluice.ValidationError
	_, _, err = b.ctl.PutEventType(ctx, b.owner, sluice.ReservedTypePrefix+"mine", in)
	require.ErrorAs(t, err, &v)
	require.Equal(t, "name", v.Fields[0].Field)
	_, _, err = b.ctl.PutEventType(ctx, b.owner, "order.created",
		control.EventTypeInput{Example: json.RawMessage(`{"n": 1}`), Schema: in.Schema})
	require.ErrorAs(t, err, &v)
	require.Equal(t, "example", v.Fields[0].Field)
	require.Empty(t, b.auditLog(t, b.owner))

	set, err := b.ctl.EventSchemas().Schemas(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.Nil(t, set.For("order.created"), "no schema yet")

	et, created, err := b.ctl.PutEventType(ctx, b.owner, "order.created", in)
	require.NoError(t, err)
	require.True(t, created)
	e := b.lastEntry(t, b.owner, 1)
	require.Equal(t, string(control.EventTypeCreated), e.Action)
	require.Equal(t, "order.created", *e.ObjectID)
	set, err = b.ctl.EventSchemas().Schemas(ctx, b.f.TenantA.ID)
	require.NoError(t, err)
	require.NotNil(t, set.For("order.created"), "the cache forgot the tenant's schemas")

	in.Description = "An order was placed"
	et2, created, err := b.ctl.PutEventType(ctx, b.admin(), "order.created", in)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, et.ID, et2.ID)
	e = b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.EventTypeUpdated), e.Action)
	require.Equal(t, []string{"description"}, e.Changed)

	_, _, err = b.ctl.EventType(ctx, b.other, "order.created")
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's entry")
	own, operational, err := b.ctl.EventType(ctx, b.other, sluice.OperationalEventTypes()[0].Name)
	require.NoError(t, err)
	require.True(t, operational)
	require.NotEmpty(t, own.Name)
	page, err := b.ctl.EventTypes(ctx, b.owner, sluice.PageParams{Limit: sluice.MaxPageLimit})
	require.NoError(t, err)
	require.Len(t, page.Items, len(sluice.OperationalEventTypes())+1, "Sluice's own types ahead of the tenant's")
}

// TestCreateUpdateDeleteEventType: the dashboard's forms create only a new
// name and update only an existing one; deleting is audited and refused
// for Sluice's own types.
func TestCreateUpdateDeleteEventType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.ctl.UpdateEventType(ctx, b.owner, "order.created", control.EventTypeInput{})
	require.ErrorIs(t, err, sluice.ErrNotFound)
	_, err = b.ctl.CreateEventType(ctx, b.owner, "order.created", control.EventTypeInput{})
	require.NoError(t, err)
	_, err = b.ctl.CreateEventType(ctx, b.owner, "order.created", control.EventTypeInput{})
	require.ErrorIs(t, err, sluice.ErrConflict)
	_, err = b.ctl.UpdateEventType(ctx, b.other, "order.created", control.EventTypeInput{})
	require.ErrorIs(t, err, sluice.ErrNotFound, "another tenant's entry")

	var v *sluice.ValidationError
	require.ErrorAs(t, b.ctl.DeleteEventType(ctx, b.owner, sluice.OperationalEventTypes()[0].Name), &v)
	require.ErrorIs(t, b.ctl.DeleteEventType(ctx, b.viewer, "order.created"), sluice.ErrForbidden)
	require.ErrorIs(t, b.ctl.DeleteEventType(ctx, b.other, "order.created"), sluice.ErrNotFound)
	require.NoError(t, b.ctl.DeleteEventType(ctx, b.owner, "order.created"))
	e := b.lastEntry(t, b.owner, 2)
	require.Equal(t, string(control.EventTypeDeleted), e.Action)
	require.Equal(t, "order.created", *e.ObjectID)
	_, _, err = b.ctl.EventType(ctx, b.owner, "order.created")
	require.ErrorIs(t, err, sluice.ErrNotFound)
}
