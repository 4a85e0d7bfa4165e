package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/jobs/jobstest"
	"github.com/sluice-dev/sluice/internal/maintenance"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
	"github.com/sluice-dev/sluice/internal/testkit/receiver"
)

// TestRetentionDropsWeeksKeepsDeadAndQueued: retention drops a week of
// events, deliveries and attempts once all of it is older than
// SLUICE_RETENTION,
// keeping what must outlive it (a dead delivery, kept for replay until
// SLUICE_DEAD_RETENTION, and a queued one) with their attempts and event,
// which the API still shows and the dispatcher still delivers.
func TestRetentionDropsWeeksKeepsDeadAndQueued(t *testing.T) {
	ctx := context.Background()
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms"})
	ok, bad, busy := receiver.New(t), receiver.New(t), receiver.New(t)
	bad.Answer(receiver.Behavior{Status: 500})
	busy.Answer(receiver.Behavior{Status: 429, RetryAfter: "3600"})
	okID, _ := h.endpoint(ok, []string{"*"}, nil)
	badID, _ := h.endpoint(bad, []string{"*"}, nil)
	busyID, _ := h.endpoint(busy, []string{"*"}, nil)
	eventID := h.post("keep.or.drop", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool {
		return len(h.deliveries("status=delivered&endpoint_id="+okID)) == 1 &&
			len(h.deliveries("status=dead&endpoint_id="+badID)) == 1 &&
			busy.Count() == 1
	}, "one delivered, one dead, one throttled")
	queued := h.deliveries("endpoint_id=" + busyID)
	require.Len(t, queued, 1)
	require.Equal(t, "pending", queued[0].Status)

	// Sluice's own retention job runs on start (then hourly), at the real
	// time: were it to run after the drop below, it would make this week's
	// partitions again and move the kept rows back into them.
	h.retentionRanOnce()
	days := maintenance.RetentionConfig{Delivered: 14 * 24 * time.Hour, Dead: 30 * 24 * time.Hour}
	w, err := maintenance.NewRetentionWorker(h.proc.Store, days)
	require.NoError(t, err)
	now := time.Now()
	r, err := w.Run(ctx, now)
	require.NoError(t, err)
	require.Zero(t, r.Dropped, "nothing is old enough yet")
	require.Len(t, h.deliveries("endpoint_id="+okID), 1)

	// Three weeks and a day on, the event's week is past SLUICE_RETENTION.
	later := now.Add(22 * 24 * time.Hour)
	r, err = w.Run(ctx, later)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.Dropped, 1)
	require.EqualValues(t, 2, r.Kept, "the dead and the queued delivery")
	require.Positive(t, r.Created, "the partitions of that week")
	require.Positive(t, r.Removed, "the week's indexes and tables, one at a time")
	require.Empty(t, h.retired(), "nothing of the week is left")
	require.Empty(t, h.deliveries("endpoint_id="+okID), "delivered and old: dropped with its week")
	dead := h.deliveries("status=dead&endpoint_id=" + badID)
	require.Len(t, dead, 1, "dead ones are kept for replay")
	require.Len(t, h.delivery(dead[0].ID).Attempts, dead[0].AttemptCount, "with their attempts")
	h.call(http.MethodGet, "/v1/events/"+eventID, nil, http.StatusOK, nil)
	require.Equal(t, map[string]int{"events": 1, "deliveries": 2, "delivery_attempts": 1 + dead[0].AttemptCount},
		h.keptRows(), "only what outlives the week is kept")

	// The queued delivery is still delivered, from where it was kept, once
	// its receiver's hour of throttling is over (cut short here) and its
	// parked run is woken (by an endpoint update).
	busy.Answer(receiver.Behavior{Status: 200})
	_, err = h.proc.Pool.Exec(ctx, "DELETE FROM destination_throttle WHERE endpoint_id = $1", busyID)
	require.NoError(t, err)
	// The retry first: once the update has woken the parked run, the
	// delivery may be delivered before a retry could be asked for.
	h.call(http.MethodPost, "/v1/deliveries/"+queued[0].ID+"/retry", nil, http.StatusAccepted, nil)
	h.call(http.MethodPatch, "/v1/endpoints/"+busyID, map[string]any{"description": "back"}, http.StatusOK, nil)
	eventually(t, 10*time.Second, func() bool {
		return len(h.deliveries("status=delivered&endpoint_id="+busyID)) == 1
	}, "the kept queued delivery delivered")

	// Run again then: the delivery delivered today from the kept
	// partitions is older than SLUICE_RETENTION by then; the dead one is
	// kept until SLUICE_DEAD_RETENTION.
	r, err = w.Run(ctx, later)
	require.NoError(t, err)
	require.Equal(t, 1, r.Expired)
	require.Empty(t, h.deliveries("endpoint_id="+busyID))
	require.Len(t, h.deliveries("status=dead&endpoint_id="+badID), 1)
	require.Equal(t, map[string]int{"events": 1, "deliveries": 1, "delivery_attempts": dead[0].AttemptCount}, h.keptRows())

	r, err = w.Run(ctx, now.Add(31*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, r.Expired)
	require.Empty(t, h.deliveries("endpoint_id="+badID), "dead and past SLUICE_DEAD_RETENTION: deleted")
	require.Equal(t, map[string]int{"events": 0, "deliveries": 0, "delivery_attempts": 0}, h.keptRows(),
		"the event and the attempts go with the last delivery that needed them")
}

// TestRetentionKeepsWhatARunLeftRetired: a run that stops after retiring
// a week (its partitions detached, what it keeps not yet moved out) leaves
// a dead delivery out of sight; the next run keeps it, with its attempts
// and event, and drops what is left of the week.
func TestRetentionKeepsWhatARunLeftRetired(t *testing.T) {
	ctx := context.Background()
	h := start(t, map[string]string{"SLUICE_RETRY_SCHEDULE": "10ms"})
	bad := receiver.New(t)
	bad.Answer(receiver.Behavior{Status: 500})
	badID, _ := h.endpoint(bad, []string{"*"}, nil)
	eventID := h.post("keep.me", map[string]int{"x": 1})
	eventually(t, 10*time.Second, func() bool {
		return len(h.deliveries("status=dead&endpoint_id="+badID)) == 1
	}, "the delivery dead")
	h.retentionRanOnce()

	// Called alone, as the job would after a crash, RetireWeek gives up on
	// locks Sluice's own statements hold (PartitionLockTimeout); the job
	// tries again, and so does this test.
	now := time.Now()
	var retired bool
	var err error
	eventually(t, 30*time.Second, func() bool {
		retired, err = maintenance.RetireWeek(ctx, h.proc.Store, now)
		return !maintenance.LockNotAvailable(err)
	}, "the week retired")
	require.NoError(t, err)
	require.True(t, retired)
	suffix := store.PartitionWeek(now).Format("20060102")
	require.ElementsMatch(t, []string{"retired_events_" + suffix, "retired_deliveries_" + suffix,
		"retired_delivery_attempts_" + suffix}, h.retired())
	require.Empty(t, h.deliveries("endpoint_id="+badID), "out of sight until kept")

	w, err := maintenance.NewRetentionWorker(h.proc.Store, maintenance.RetentionConfig{Delivered: 14 * 24 * time.Hour, Dead: 30 * 24 * time.Hour})
	require.NoError(t, err)
	r, err := w.Run(ctx, now.Add(22*24*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Kept)
	require.Greater(t, r.Removed, 3, "each table, and before it each index no constraint needs")
	require.Empty(t, h.retired())
	dead := h.deliveries("status=dead&endpoint_id=" + badID)
	require.Len(t, dead, 1)
	require.Len(t, h.delivery(dead[0].ID).Attempts, dead[0].AttemptCount)
	h.call(http.MethodGet, "/v1/events/"+eventID, nil, http.StatusOK, nil)
}

// retired lists the tables of retired or expired weeks still there.
func (h *harness) retired() []string {
	h.t.Helper()
	rows, err := h.proc.Pool.Query(context.Background(),
		`SELECT relname::text FROM pg_class WHERE relname ~ '^(retired|expired)_' AND relkind = 'r' AND pg_table_is_visible(oid)`)
	require.NoError(h.t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(h.t, err)
	return names
}

// delivery fetches one delivery with its attempts.
func (h *harness) delivery(id string) delivery {
	h.t.Helper()
	var d delivery
	h.call(http.MethodGet, "/v1/deliveries/"+id, nil, http.StatusOK, &d)
	return d
}

// keptRows counts the rows of the kept partitions.
func (h *harness) keptRows() map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for _, table := range []string{"events", "deliveries", "delivery_attempts"} {
		var n int
		require.NoError(h.t, h.proc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+"_kept").Scan(&n))
		out[table] = n
	}
	return out
}

// retentionRanOnce waits until Sluice's retention job has completed once.
func (h *harness) retentionRanOnce() {
	h.t.Helper()
	eventually(h.t, 30*time.Second, func() bool {
		return len(jobstest.InState(jobstest.OfKind(h.t, h.proc.Pool, jobs.RetentionArgs{}.Kind()), "completed")) > 0
	}, "Sluice's retention job completed on start")
}

// TestAuditRetentionDropsWholeMonths: retention drops each month of the
// audit log, as one table, once the month after it is past
// SLUICE_AUDIT_RETENTION, and keeps the months after it.
func TestAuditRetentionDropsWholeMonths(t *testing.T) {
	ctx := context.Background()
	h := start(t, nil)
	h.retentionRanOnce()
	now := time.Now().UTC()
	old, recent := now.AddDate(0, -14, 0), now.AddDate(0, -11, 0)
	for _, at := range []time.Time{old, recent} {
		_, err := store.Read(ctx, h.proc.Store, (*dbq.Queries).EnsureAuditMonth, at)
		require.NoError(t, err)
		_, err = h.proc.Store.Pool().Exec(ctx, `
			INSERT INTO audit_log (id, tenant_id, at, actor_type, actor_id, actor_name, action)
			VALUES (gen_random_uuid(), $1, $2, 'api_key', 'k', 'ci', 'endpoint.updated')`, h.tenant.ID, at)
		require.NoError(t, err)
	}
	parts := func() []string {
		rows, err := h.proc.Store.Pool().Query(ctx, `
			SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'audit_log'::regclass AND c.relname <> 'audit_log_kept' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	month := func(t time.Time) string { return "audit_log_" + t.Format("200601") }
	require.Contains(t, parts(), month(old))

	w, err := maintenance.NewRetentionWorker(h.proc.Store, maintenance.RetentionConfig{Delivered: 14 * 24 * time.Hour, Dead: 30 * 24 * time.Hour})
	require.NoError(t, err)
	r, err := w.Run(ctx, now)
	require.NoError(t, err)
	require.Equal(t, 1, r.AuditDropped)
	require.NotContains(t, parts(), month(old))
	require.Contains(t, parts(), month(recent))
	require.Contains(t, parts(), month(now))
	var left []time.Time
	rows, err := h.proc.Store.Pool().Query(ctx, `SELECT at FROM audit_log WHERE tenant_id = $1`, h.tenant.ID)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.WithinDuration(t, recent, left[0], time.Second)
}
