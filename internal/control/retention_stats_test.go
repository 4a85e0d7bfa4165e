package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// oldRow stores, by SQL, a delivery of event (a new event of type "old"
// when event is uuid.Nil) to ep, created age ago with an id (and the
// event's) of that time, as UUIDv7s are, in status, updated at updated
// ago, with one attempt per code, the n-th at attemptAges[n] ago. It
// returns the event's id and the delivery's.
func oldRow(t *testing.T, b *testBundle, event, ep uuid.UUID, age time.Duration, status string, updated time.Duration,
	codes []int, attemptAges []time.Duration) (uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	pool := b.f.Store.Pool()
	created := time.Now().Add(-age)
	idAt := `(lpad(to_hex($1::bigint), 12, '0') || substr(replace(gen_random_uuid()::text, '-', ''), 13))::uuid`
	if event == uuid.Nil {
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO events (id, tenant_id, type, payload, created_at)
			VALUES (`+idAt+`, $2, 'old', '{}', $3) RETURNING id`, created.UnixMilli(), b.owner.Tenant, created).Scan(&event))
	}
	var del uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, event_type, status,
			attempt_count, created_at, updated_at)
		VALUES (`+idAt+`, $2, $3, $4, 'old', $5, $6, $7, $8) RETURNING id`,
		created.UnixMilli(), b.owner.Tenant, event, ep, status, len(codes), created, time.Now().Add(-updated)).Scan(&del))
	for i, code := range codes {
		_, err := pool.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, at, status_code, latency_ms, endpoint_id, event_id)
			VALUES ($1, $2, $3, 1, $4, $5)`, del, time.Now().Add(-attemptAges[i]), code, ep, event)
		require.NoError(t, err)
	}
	return event, del
}

// TestStatsHidePastRetention: once a tenant keeps its deliveries an hour,
// an endpoint's charts (AttemptStats) and an event's fan-out count
// (FanOut) leave out the deliveries past it, at once, as the lists do:
// the attempts of a delivered delivery created before the hour, even one
// whose last attempt is inside it, stop being counted; those of a
// delivered one created inside it, and of a dead one (kept for replay)
// however old, still are.
func TestStatsHidePastRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ep, ep2 := b.endpoint(t, b.owner).ID, b.endpoint(t, b.owner).ID
	h := time.Hour
	// ev goes to ep (delivered 3 hours ago: hidden) and to ep2 (dead, died
	// just now: kept), so ev itself stays listed.
	ev, oldDelivered := oldRow(t, b, uuid.Nil, ep, 3*h, "delivered", 3*h, []int{200}, []time.Duration{3 * h})
	_, dead := oldRow(t, b, ev, ep2, 3*h, "dead", 0, []int{500}, []time.Duration{3 * h})
	// Created two hours ago, retried, delivered half an hour ago: hidden.
	_, retried := oldRow(t, b, uuid.Nil, ep, 2*h, "delivered", h/2, []int{503, 200}, []time.Duration{2 * h, h / 2})
	// Created and delivered ten minutes ago: kept.
	_, recent := oldRow(t, b, uuid.Nil, ep, 10*time.Minute, "delivered", 10*time.Minute, []int{200}, []time.Duration{10 * time.Minute})

	totals := func(endpoint uuid.UUID) (delivered, failed int64) {
		t.Helper()
		until := time.Now().Add(time.Minute)
		buckets, err := b.ctl.AttemptStats(ctx, b.owner, endpoint, until.Add(-24*h), until, 30*time.Minute)
		require.NoError(t, err)
		for _, bk := range buckets {
			delivered, failed = delivered+bk.Delivered, failed+bk.Failed+bk.Throttled
		}
		return delivered, failed
	}
	fanOut := func() int64 {
		t.Helper()
		got, err := b.ctl.FanOut(ctx, b.owner, []sluice.Event{{ID: ev}})
		require.NoError(t, err)
		return got[ev]
	}
	listed := func() []uuid.UUID {
		t.Helper()
		page, err := b.ctl.Deliveries(ctx, b.owner, sluice.DeliveryFilter{}, sluice.PageParams{Limit: 10})
		require.NoError(t, err)
		return idsOfDeliveries(page.Items)
	}

	require.ElementsMatch(t, []uuid.UUID{oldDelivered, dead, retried, recent}, listed())
	delivered, failed := totals(ep)
	require.Equal(t, [2]int64{3, 1}, [2]int64{delivered, failed}, "with the server's retention every attempt counts")
	require.EqualValues(t, 2, fanOut())

	set := "1h"
	_, err := b.ctl.SetTenantRetention(ctx, b.owner, control.RetentionChange{Retention: control.DurationChange{Set: true, Value: &set}})
	require.NoError(t, err)

	require.ElementsMatch(t, []uuid.UUID{dead, recent}, listed(), "the lists hide what is past the tenant's hour")
	delivered, failed = totals(ep)
	require.Equal(t, [2]int64{1, 0}, [2]int64{delivered, failed},
		"the chart counts only the recent delivery's attempt, not the hidden ones (the retried one's last attempt included)")
	delivered, failed = totals(ep2)
	require.Equal(t, [2]int64{0, 1}, [2]int64{delivered, failed}, "a dead delivery kept for replay still counts")
	require.EqualValues(t, 1, fanOut(), "the event's fan-out counts its kept delivery only")

	other, err := b.ctl.FanOut(ctx, b.other, []sluice.Event{{ID: ev}})
	require.NoError(t, err)
	require.Empty(t, other, "another tenant counts none of it")
}
