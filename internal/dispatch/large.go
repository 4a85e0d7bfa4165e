package dispatch

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// A large payload (over 1 MiB: SLUICE_MAX_PAYLOAD raised past its default)
// is left out of claims (ClaimDueDeliveries) and read here instead, once
// for all the deliveries of its event that the worker has in flight at
// the same time, whichever endpoints they go to. It is held, opened, while
// any of them is being sent, and a while after for the sends of its event
// still to come (shared.go), and sent as it is between its body's head and
// tail (send.Message.Parts): a worker holds one copy of each large event it
// is sending, not one per delivery, and never a second one for the body.
// Small payloads come with their claim, as before, at no cost here.

// largePayload is an event's large payload, shared with the other sends
// of the event (send says whether the caller sends it, or reads it ahead).
func (w *Worker) largePayload(ctx context.Context, tenantID, eventID uuid.UUID, send bool) ([]byte, func(), error) {
	return w.large.get(ctx, eventID, send, func(ctx context.Context) ([]byte, int, error) {
		return w.readPayload(ctx, tenantID, eventID)
	})
}

// readPayload reads a large event's payload, opened, and how many of its
// sends are still to come.
func (w *Worker) readPayload(ctx context.Context, tenantID, eventID uuid.UUID) ([]byte, int, error) {
	stored, sends, err := readLarge(ctx, w.db.st.Pool(), eventID)
	if err != nil {
		return nil, 0, fmt.Errorf("read payload: %w", err)
	}
	payload, err := w.payloads.OpenJSON(ctx, tenantID, stored)
	if err != nil {
		return nil, 0, fmt.Errorf("open sealed payload: %w", err)
	}
	return payload, sends, nil
}

// largePiece is the most of a large payload one row of LargePayload holds:
// a row of it fits a buffer of 1 MiB. pgx reads a row into a buffer of its
// size (rounded up to a power of two: 16 MiB for a payload of 10 MiB) that
// the connection keeps until its next statement, so a payload read whole
// would leave a buffer that large on every connection that last read one.
const largePiece = 1<<20 - 1<<10

// readLarge reads a large event's payload as stored, in pieces of
// largePiece, into one buffer of its size, and how many of its sends are
// still to come.
func readLarge(ctx context.Context, db dbq.DBTX, eventID uuid.UUID) ([]byte, int, error) {
	rows, err := dbq.New(db).LargePayload(ctx, dbq.LargePayloadParams{ID: eventID, Piece: largePiece})
	if err != nil {
		return nil, 0, err //nolint:wrapcheck // described by readPayload
	}
	if len(rows) == 0 {
		return nil, 0, store.NotFound(pgx.ErrNoRows)
	}
	payload := make([]byte, 0, rows[0].Size)
	for _, r := range rows {
		payload = append(payload, r.Piece...)
	}
	return payload, int(rows[0].Sends), nil
}

// A run sending large payloads reads the next batch's while it sends the
// current one: the read of a large payload (from Postgres, tens of
// milliseconds a MiB) takes as long as its sends or longer, and a run that
// claimed, read, sent and recorded in turn left the receivers idle while it
// read. After a full claim that left payloads out, readAhead looks up which
// of the endpoint's next due deliveries (those the next claim will take,
// unless others come due first) have large payloads, and reads them into
// the shared payloads while the batch is sent; the next batch's sends find
// them there. A run holds at most the payloads of the batch it sends and of
// the next one: max_in_flight × 2, the bound of what a worker holds. A FIFO
// endpoint's next heads are not known before its batch is recorded, and a
// plain endpoint's small payloads come with their claim: neither reads
// ahead, nor pays a statement for it.

// readAhead is one run's payloads read for its next batch.
type readAhead struct {
	cancel   context.CancelFunc
	done     chan struct{} // closed once every read has ended
	releases []func()      // set before done is closed
}

// readAheadFor starts reading the large payloads of the batch after
// claimed, when claimed is a full claim (plan.n deliveries: more may be
// due) of an unordered endpoint that left a payload out; otherwise it
// returns nil, and costs nothing. Call its release once the next batch is
// sent, or when the run ends.
func (w *Worker) readAheadFor(ctx context.Context, target Target, plan claimPlan, claimed Claim) *readAhead {
	n := len(claimed.Deliveries)
	if target.FIFO || claimed.Handed || n == 0 || n < plan.n {
		return nil
	}
	current := leftOut(claimed.Deliveries)
	if len(current) == 0 {
		return nil
	}
	after := claimed.Deliveries[n-1].Position()
	ctx, cancel := context.WithCancel(ctx)
	a := &readAhead{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		w.awaitPayloads(ctx, target.TenantID, current)
		events, err := store.Read(ctx, w.db.st, (*dbq.Queries).NextLargeEvents, dbq.NextLargeEventsParams{
			EndpointID: target.ID, AfterAt: after.NextAttemptAt, AfterID: after.ID, MaxRows: int32(plan.n),
		})
		if err != nil {
			return // the next batch's sends read them themselves
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, eventID := range events {
			wg.Go(func() {
				_, release, err := w.largePayload(ctx, target.TenantID, eventID, false)
				if err != nil {
					return
				}
				mu.Lock()
				a.releases = append(a.releases, release)
				mu.Unlock()
			})
		}
		wg.Wait()
	}()
	return a
}

// leftOut is the events of a claim whose payloads it left out (large ones).
func leftOut(claimed []Claimed) []uuid.UUID {
	var events []uuid.UUID
	for _, c := range claimed {
		if c.Payload == nil {
			events = append(events, c.EventID)
		}
	}
	return events
}

// awaitPayloads waits until the large payloads of a batch are read, by its
// sends or here, and lets them go to its sends: the next batch's are read
// after them, not beside them, so that the batch's sends, the first run's
// above all, do not share Postgres with the reading of the next batch.
func (w *Worker) awaitPayloads(ctx context.Context, tenantID uuid.UUID, events []uuid.UUID) {
	for _, eventID := range events {
		if _, release, err := w.largePayload(ctx, tenantID, eventID, false); err == nil {
			release()
		}
	}
}

// release ends the read ahead, if still reading, and lets its payloads go:
// those the next batch's sends use are held by them until each is sent.
// Nil does nothing.
func (a *readAhead) release() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	for _, release := range a.releases {
		release()
	}
}
