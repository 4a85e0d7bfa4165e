package fanout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// IdempotencyWindow is how long an Idempotency-Key keeps answering with the
// event it first created.
const IdempotencyWindow = 24 * time.Hour

// ErrIdempotencyMismatch reports a reused Idempotency-Key with a different
// event: another type, consumer, broadcast or ordering key, or a payload
// that is not the same JSON value (jsonEqual).
var ErrIdempotencyMismatch = fmt.Errorf("%w: this Idempotency-Key was used with a different event", sluice.ErrConflict)

// InsertOne stores one event on its own, as an event that carries an
// Idempotency-Key is stored, and queues its fan-out job in the same
// transaction. With a key seen in the last IdempotencyWindow it creates
// nothing and returns the first event, with created false, or
// ErrIdempotencyMismatch when that event differs.
func InsertOne(ctx context.Context, st *store.Store, tenantID uuid.UUID, ev sluice.NewEvent, nudger dispatch.TxNudger) (sluice.Event, bool, error) {
	var (
		out     sluice.Event
		created bool
		clear   = ev.Payload
	)
	if pl := st.Payloads(); pl.Sealing() {
		sealed, err := pl.SealJSON(ctx, tenantID, ev.Payload)
		if err != nil {
			return sluice.Event{}, false, fmt.Errorf("store event with idempotency key: seal payload: %w", err)
		}
		ev.Payload = sealed
	}
	err := st.InTx(ctx, func(tx store.Tx) error {
		if ev.IdempotencyKey != "" {
			first, found, err := recentEventByKey(ctx, tx.Q, tenantID, ev.IdempotencyKey)
			if err != nil {
				return err
			}
			if found {
				out = first
				return nil
			}
		}
		stored, err := tx.InsertEvent(ctx, tenantID, ev)
		if err != nil {
			return fmt.Errorf("store event: %w", err)
		}
		out, created = stored, true
		if err := queueFanOut(ctx, tx, nudger, []sluice.Event{stored}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return sluice.Event{}, false, fmt.Errorf("store event with idempotency key: %w", err)
	}
	if out.Payload, err = st.Payloads().OpenJSON(ctx, tenantID, out.Payload); err != nil {
		return sluice.Event{}, false, fmt.Errorf("store event with idempotency key: open payload: %w", err)
	}
	if !created && (out.Type != ev.Type || !jsonEqual(out.Payload, clear) ||
		deref(out.Consumer) != deref(ev.Consumer) || out.Broadcast != ev.Broadcast ||
		deref(out.OrderingKey) != deref(ev.OrderingKey)) {
		return out, false, ErrIdempotencyMismatch
	}
	return out, created, nil
}

// recentEventByKey takes the tenant's lock on an Idempotency-Key, until
// the transaction ends, and returns the event the key created in the last
// IdempotencyWindow, if any. Holding the lock, a second request with the
// same key waits for the first to commit and then sees its event.
func recentEventByKey(ctx context.Context, q *dbq.Queries, tenantID uuid.UUID, key string) (sluice.Event, bool, error) {
	if err := q.LockIdempotencyKey(ctx, tenantID.String()+":"+key); err != nil {
		return sluice.Event{}, false, fmt.Errorf("lock idempotency key: %w", err)
	}
	row, err := q.RecentEventByIdempotencyKey(ctx, dbq.RecentEventByIdempotencyKeyParams{
		TenantID: tenantID, IdempotencyKey: &key, Since: time.Now().Add(-IdempotencyWindow),
	})
	if errors.Is(store.NotFound(err), sluice.ErrNotFound) {
		return sluice.Event{}, false, nil
	}
	if err != nil {
		return sluice.Event{}, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	return store.EventFromRow(row), true, nil
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
