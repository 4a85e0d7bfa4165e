package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

// TestFIFOClaimTakesTheHeadOfEachLine: a FIFO endpoint's claim takes the
// head of each line (one per ordering key), numbered 1 in its line, and
// the same heads with the same numbers when claimed again before they are
// recorded. A delivery queued before the endpoint became FIFO is put in
// line. A head waiting for its retry blocks its line; a head behind an
// event still waiting for its fan-out job is held up until the job has
// run; once a head is delivered, the next of its line is claimed, numbered
// next.
func TestFIFOClaimTakesTheHeadOfEachLine(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	ep := subscribed(t, f, "fifo.x")
	post := func(key string, route bool) uuid.UUID {
		t.Helper()
		ev := sluice.NewEvent{Type: "fifo.x", Payload: []byte(`{}`)}
		if key != "" {
			ev.OrderingKey = &key
		}
		stored, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, ev, f.Jobs)
		require.NoError(t, err)
		if route {
			_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{stored.ID}, nil)
			require.NoError(t, err)
		}
		return stored.ID
	}
	e0 := post("k1", true) // before the endpoint is FIFO
	ctl := control.New(control.Config{Store: f.Store, Nudger: f.Jobs})
	owner := control.Caller{Tenant: f.TenantA.ID, Role: sluice.RoleOwner, Actor: sluice.Actor{Type: sluice.ActorAPIKey, ID: "test", Name: "test"}}
	_, err := ctl.UpdateEndpoint(ctx, owner, ep, control.EndpointInput{Ordering: new(sluice.OrderingFIFO)})
	require.NoError(t, err)
	e1, e2, e3 := post("k1", true), post("k2", true), post("", true)

	db := dispatch.NewDB(f.Store)
	claim := func(n int) dispatch.Claim {
		t.Helper()
		tx, err := db.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		c, err := tx.ClaimFIFO(ctx, ep, n, time.Now())
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return c
	}
	type got struct {
		event uuid.UUID
		seq   int64
	}
	heads := func(c dispatch.Claim) []got {
		var out []got
		for _, d := range c.Deliveries {
			out = append(out, got{d.EventID, d.Sequence})
		}
		return out
	}
	first := claim(10)
	require.Equal(t, []got{{e0, 1}, {e2, 1}, {e3, 1}}, heads(first), "each line's head, oldest first, numbered 1")
	require.Equal(t, heads(first), heads(claim(10)), "claimed again unrecorded: the same heads and numbers")
	require.Equal(t, []got{{e0, 1}}, heads(claim(1)), "up to the limit")

	// A late-routed event holds up the heads behind it until its fan-out.
	late := post("k3", false)
	behind := post("k4", true)
	c := claim(10)
	require.Equal(t, []got{{e0, 1}, {e2, 1}, {e3, 1}}, heads(c), "the head behind the unrouted event is held up")
	_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{late}, nil)
	require.NoError(t, err)
	require.Equal(t, []got{{e0, 1}, {e2, 1}, {e3, 1}, {late, 1}, {behind, 1}}, heads(claim(10)))

	// Record: e0 delivered, e2 failed with a retry in an hour.
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	byEvent := map[uuid.UUID]uuid.UUID{}
	for _, d := range first.Deliveries {
		byEvent[d.EventID] = d.ID
	}
	now := time.Now()
	require.NoError(t, tx.RecordOutcomes(ctx, []dispatch.Outcome{
		{DeliveryID: byEvent[e0], EventID: e0, Status: sluice.DeliveryDelivered, At: now, StatusCode: 200},
		{DeliveryID: byEvent[e2], EventID: e2, Status: sluice.DeliveryFailed, Failed: true, NextAttemptAt: now.Add(time.Hour), At: now, StatusCode: 500},
	}))
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, []got{{e1, 2}, {e3, 1}, {late, 1}, {behind, 1}}, heads(claim(10)),
		"k1's next, numbered 2; k2 blocked by its head's retry")
}

// TestClaimsLeaveLargePayloadsOut: a claim, FIFO or not, leaves out a
// payload stored in over 1 MiB (the sends of its event read it once,
// shared) and brings a small one with it.
func TestClaimsLeaveLargePayloadsOut(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	ctx := t.Context()
	unordered, fifo := subscribed(t, f, "big.claim"), subscribed(t, f, "big.claim")
	ctl := control.New(control.Config{Store: f.Store, Nudger: f.Jobs})
	owner := control.Caller{Tenant: f.TenantA.ID, Role: sluice.RoleOwner, Actor: sluice.Actor{Type: sluice.ActorAPIKey, ID: "test", Name: "test"}}
	_, err := ctl.UpdateEndpoint(ctx, owner, fifo, control.EndpointInput{Ordering: new(sluice.OrderingFIFO)})
	require.NoError(t, err)
	post := func(key string, payload []byte) uuid.UUID {
		t.Helper()
		stored, _, err := fanout.InsertOne(ctx, f.Store, f.TenantA.ID, sluice.NewEvent{Type: "big.claim", Payload: payload, OrderingKey: &key}, f.Jobs)
		require.NoError(t, err)
		_, _, err = fanout.Events(ctx, f.Store, []uuid.UUID{stored.ID}, nil)
		require.NoError(t, err)
		return stored.ID
	}
	small, large := post("k1", []byte(`{"small":true}`)), post("k2", largePayload(1, 3<<20))
	var size int
	require.NoError(t, f.Store.Pool().QueryRow(ctx, `SELECT pg_column_size(payload) FROM events WHERE id = $1`, large).Scan(&size))
	require.Greater(t, size, 1<<20, "stored in over 1 MiB")

	payloads := func(c []dispatch.Claimed) map[uuid.UUID][]byte {
		out := map[uuid.UUID][]byte{}
		for _, d := range c {
			out[d.EventID] = d.Payload
		}
		return out
	}
	db := dispatch.NewDB(f.Store)
	claimed, err := db.ClaimUnlocked(ctx, unordered, 10)
	require.NoError(t, err)
	got := payloads(claimed)
	require.Len(t, got, 2)
	require.JSONEq(t, `{"small":true}`, string(got[small]), "unordered: a small payload comes with its claim")
	require.Zero(t, len(got[large]), "unordered: a large payload is left out")

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	c, err := tx.ClaimFIFO(ctx, fifo, 10, time.Now())
	require.NoError(t, err)
	got = payloads(c.Deliveries)
	require.Len(t, got, 2, "the head of each line")
	require.JSONEq(t, `{"small":true}`, string(got[small]), "FIFO: a small payload comes with its claim")
	require.Zero(t, len(got[large]), "FIFO: a large payload is left out")
}
