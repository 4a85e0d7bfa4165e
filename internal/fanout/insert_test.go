package fanout_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestWideGroupsFanOutByJob stores two groups of events for 40 endpoints:
// one whose deliveries fit under fanout.MaxInlineDeliveries, made in its
// commit, and one just over it, left whole to a fan-out job.
func TestWideGroupsFanOutByJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := storetest.New(t)
	const endpoints = 40
	for i := range endpoints {
		ep := newEndpoint(t, f, fmt.Sprint(i))
		_, err := f.Store.CreateSubscription(ctx, f.TenantA.ID, ep, []string{"*"}, nil)
		require.NoError(t, err)
	}
	group := func(n int) []fanout.TenantEvent {
		evs := make([]fanout.TenantEvent, n)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: sluice.NewEvent{Type: "t.x", Payload: []byte(`{}`)}}
		}
		return evs
	}
	fits := fanout.MaxInlineDeliveries / endpoints

	out, touched, err := fanout.Insert(ctx, f.Store, group(fits), f.Jobs)
	require.NoError(t, err)
	require.Len(t, touched, endpoints)
	require.Equal(t, fits*endpoints, deliveriesOf(t, f, out))
	require.Zero(t, fanoutJobs(t, f))

	out, touched, err = fanout.Insert(ctx, f.Store, group(fits+1), f.Jobs)
	require.NoError(t, err)
	require.Empty(t, touched)
	require.Zero(t, deliveriesOf(t, f, out), "none made in the commit")
	require.Equal(t, 1, fanoutJobs(t, f), "one job for the whole group")
}

func deliveriesOf(t *testing.T, f storetest.Fixture, evs []sluice.Event) int {
	t.Helper()
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	var n int
	require.NoError(t, f.Store.Pool().QueryRow(t.Context(), `SELECT count(*) FROM deliveries WHERE event_id = ANY($1)`, ids).Scan(&n))
	return n
}

func fanoutJobs(t *testing.T, f storetest.Fixture) int {
	t.Helper()
	return len(jobstest.OfKind(t, f.Store.Pool(), "fanout"))
}

// TestGroupsAreStoredAsPosted: a small group of events (one INSERT) and a
// large one (COPY) store each event as posted: payload byte for byte,
// coalesce key, consumer (none, a consumer, or "", which is not none) and
// broadcast.
func TestGroupsAreStoredAsPosted(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	key, consumer, empty := "k-1", "acme", ""
	variants := []sluice.NewEvent{
		{Type: "a.b", Payload: []byte(`{"n": 1,  "s":"é\u00e9"}`)},
		{Type: "a.c", Payload: []byte(`[1,2]`), CoalesceKey: &key},
		{Type: "a.d", Payload: []byte(`"x"`), Consumer: &consumer},
		{Type: "a.e", Payload: []byte(`null`), Consumer: &empty},
		{Type: "a.f", Payload: []byte(`{}`), Broadcast: true},
	}
	for _, n := range []int{len(variants), 40} {
		evs := make([]fanout.TenantEvent, n)
		for i := range evs {
			evs[i] = fanout.TenantEvent{TenantID: f.TenantA.ID, Event: variants[i%len(variants)]}
		}
		out, _, err := fanout.Insert(t.Context(), f.Store, evs, f.Jobs)
		require.NoError(t, err)
		for i, want := range out {
			var got sluice.Event
			var payload string
			err := f.Store.Pool().QueryRow(t.Context(), `SELECT tenant_id, type, payload::text, coalesce_key, consumer, broadcast, created_at
				FROM events WHERE id = $1`, want.ID).Scan(&got.TenantID, &got.Type, &payload, &got.CoalesceKey, &got.Consumer, &got.Broadcast, &got.CreatedAt)
			require.NoError(t, err, "group of %d, event %d", n, i)
			require.Equal(t, string(evs[i].Event.Payload), payload, "group of %d, event %d: payload", n, i)
			require.Equal(t, want.TenantID, got.TenantID)
			require.Equal(t, want.Type, got.Type)
			require.Equal(t, want.CoalesceKey, got.CoalesceKey, "group of %d, event %d: coalesce key", n, i)
			require.Equal(t, want.Consumer, got.Consumer, "group of %d, event %d: consumer", n, i)
			require.Equal(t, want.Broadcast, got.Broadcast)
			require.WithinDuration(t, want.CreatedAt, got.CreatedAt, time.Microsecond)
		}
	}
}
