// Package ingest groups concurrent single-event posts into shared
// transactions (group commit). Each POST /v1/events still answers only
// after its event and the River job that fans it out are committed, but a
// busy API commits tens of events, and queues one fan-out job, per
// transaction instead of one each: the database's per-commit cost is what
// bounds single-event ingest. At low load a batch is one event and nothing
// waits: a batch is whatever has queued up while the previous one committed.
package ingest

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// ErrClosed is returned for events submitted after Close.
var ErrClosed = errors.New("ingest: closed")

// Config tunes a Batcher.
type Config struct {
	// Committers is how many batches may commit at once (default 4).
	Committers int
	// MaxBatch bounds the events in one transaction (default 200).
	MaxBatch int
}

// Batcher commits submitted events in groups.
type Batcher struct {
	store *store.Store
	jobs  store.JobQueue
	cfg   Config
	reqs  chan request
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

type request struct {
	ctx    context.Context
	event  store.TenantEvent
	result chan result
}

type result struct {
	event sluice.Event
	err   error
}

// New starts a Batcher; Close stops it.
func New(st *store.Store, jobs store.JobQueue, cfg Config) *Batcher {
	if cfg.Committers == 0 {
		cfg.Committers = 4
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 200
	}
	b := &Batcher{store: st, jobs: jobs, cfg: cfg, reqs: make(chan request), stop: make(chan struct{})}
	for range cfg.Committers {
		b.wg.Go(b.commitLoop)
	}
	return b
}

// Submit commits one event, possibly with others, and returns it as stored.
func (b *Batcher) Submit(ctx context.Context, tenantID uuid.UUID, ev sluice.NewEvent) (sluice.Event, error) {
	req := request{ctx: ctx, event: store.TenantEvent{TenantID: tenantID, Event: ev}, result: make(chan result, 1)}
	select {
	case b.reqs <- req:
	case <-b.stop:
		return sluice.Event{}, ErrClosed
	case <-ctx.Done():
		return sluice.Event{}, ctx.Err()
	}
	res := <-req.result // always answered once taken: the commit decides
	return res.event, res.err
}

// Close stops the Batcher after the batches in flight have committed.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

func (b *Batcher) commitLoop() {
	for {
		var first request
		select {
		case first = <-b.reqs:
		case <-b.stop:
			return
		}
		batch := b.gather(first)
		b.commit(batch)
	}
}

// gather takes whatever else is already waiting, without waiting for more.
func (b *Batcher) gather(first request) []request {
	batch := []request{first}
	for len(batch) < b.cfg.MaxBatch {
		select {
		case req := <-b.reqs:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

func (b *Batcher) commit(batch []request) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.result <- result{err: err} // the client is gone: do not store its event
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	events := make([]store.TenantEvent, len(live))
	for i, req := range live {
		events[i] = req.event
	}
	// The commit must not be cut short by one client going away.
	stored, err := b.store.CreateTenantEvents(context.WithoutCancel(live[0].ctx), events, b.jobs)
	for i, req := range live {
		if err != nil {
			req.result <- result{err: err}
			continue
		}
		req.result <- result{event: stored[i]}
	}
}
