// Package ingest groups concurrent single-event posts into shared
// transactions (group commit). Each POST /v1/events still answers only
// after its event and the River job that fans it out are committed, but a
// busy API commits tens of events, and queues one fan-out job, per
// transaction instead of one each: the database's per-commit cost is what
// bounds single-event ingest. At low load a batch is one event and nothing
// waits: a batch is whatever has queued up while the previous one committed.
//
// An event Postgres rejects (store.RowRejected) fails alone: its batch is
// split until the event is found, and every other event, whichever tenant
// posted it, is committed (see package batch).
package ingest

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/batch"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// ErrClosed is returned for events submitted after Close.
var ErrClosed = batch.ErrClosed

// Config tunes a Batcher.
type Config struct {
	// Committers is how many batches may commit at once (default 4).
	Committers int
	// MaxBatch bounds the events in one transaction (default 200).
	MaxBatch int
}

// Batcher commits submitted events in groups.
type Batcher struct {
	b *batch.Batcher[store.TenantEvent, sluice.Event]
}

// New starts a Batcher; Close stops it.
func New(st *store.Store, jobs store.JobQueue, cfg Config) *Batcher {
	commit := func(ctx context.Context, evs []store.TenantEvent) ([]sluice.Event, error) {
		return st.CreateTenantEvents(ctx, evs, jobs)
	}
	bcfg := batch.Config{Committers: cfg.Committers, MaxBatch: cfg.MaxBatch, Isolate: store.RowRejected}
	return &Batcher{b: batch.New(bcfg, commit)}
}

// Submit commits one event, possibly with others, and returns it as stored.
// An event Postgres refuses fails with an error store.RowRejected
// recognises.
func (b *Batcher) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	return b.b.Submit(ctx, store.TenantEvent{TenantID: tenantID, Event: ev})
}

// Close stops the Batcher after the batches in flight have committed.
func (b *Batcher) Close() { b.b.Close() }
