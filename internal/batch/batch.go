// Package batch commits concurrent requests in groups (group commit)
// without letting one bad request fail the others (failure isolation).
//
// Each caller submits one request and waits for its answer. A few commit
// loops each take whatever requests are already waiting, up to a bound,
// and commit them with one call: under load many requests share one
// transaction, so the database's per-commit cost is paid per group rather
// than per request. A loop never waits for more requests to arrive, so at
// low load a group is one request and batching adds no latency.
//
// With Config.Inline, a request that finds no group being committed is
// committed by its caller, in the caller's goroutine: at low load that
// saves handing it to a loop and the answer back, two goroutine wake-ups
// that can cost a machine more than the statement itself.
//
// Sharing a commit means sharing its failure. When a group's commit fails
// with an error that Config.Isolate says may be one request's fault (a row
// the database rejects), the group is split in halves and each half is
// committed on its own, recursively, until the request at fault fails
// alone with its own error and every other request commits. An error about
// the database rather than the data (it is down, the context ended) fails
// the whole group at once: splitting would only multiply the load of an
// outage.
package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river/rivershared/startstop"
)

// ErrClosed is returned for requests submitted while the Batcher is not
// running: after Stop (or Close), or before Start.
var ErrClosed = errors.New("batch: closed")

// Defaults of Config's fields.
const (
	DefaultCommitters = 4
	DefaultMaxBatch   = 200
)

// ErrOutcomeUnknown is returned when a request's context ends after a
// commit loop took it: its commit goes on, and may yet succeed.
var ErrOutcomeUnknown = errors.New("batch: the caller left while its request was being committed")

// Config tunes a Batcher. Zero fields take their defaults.
type Config struct {
	// Committers is how many groups may commit at once (default
	// DefaultCommitters).
	Committers int
	// MaxBatch bounds the requests in one group (default DefaultMaxBatch).
	MaxBatch int
	// Isolate reports whether a failed commit's error may be the fault of
	// one request in the group, so that splitting the group can find it.
	// Nil never splits.
	Isolate func(error) bool
	// Retry reports whether a failed commit's error says that nothing was
	// committed and that the same commit may succeed shortly (no server
	// takes writes during a failover). The group's requests whose callers
	// still wait are then committed again, after a pause (RetryPauseFirst,
	// doubling up to RetryPauseMax), until they commit, their callers
	// leave, or the Batcher stops. Nil never retries.
	Retry func(error) bool
	// Inline lets a caller that finds no group being committed commit its
	// request itself, as a group of one, under its own context: the
	// commit is cut short when that context ends, its outcome then
	// unknown (ErrOutcomeUnknown). Stop does not wait for inline
	// commits; their callers do. While one is under way, other requests
	// go to the loops as without Inline, so under load groups form as
	// before.
	Inline bool
}

// Pauses between tries at a commit that Config.Retry accepts.
const (
	RetryPauseFirst = 50 * time.Millisecond
	RetryPauseMax   = 500 * time.Millisecond
)

// Resolve returns c with its defaults set, or an error if a field is out
// of range.
func (c Config) Resolve() (Config, error) {
	c.Committers = cmp.Or(c.Committers, DefaultCommitters)
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	if c.Isolate == nil {
		c.Isolate = func(error) bool { return false }
	}
	if c.Retry == nil {
		c.Retry = func(error) bool { return false }
	}
	return c, c.validate()
}

func (c Config) validate() error {
	switch {
	case c.Committers < 1:
		return fmt.Errorf("batch: Committers must be positive, not %d", c.Committers)
	case c.MaxBatch < 1:
		return fmt.Errorf("batch: MaxBatch must be positive, not %d", c.MaxBatch)
	}
	return nil
}

// CommitFunc commits reqs together, all or nothing, and returns one result
// per request, in the order of reqs.
type CommitFunc[Req, Res any] func(ctx context.Context, reqs []Req) ([]Res, error)

// Batcher commits submitted requests in groups. It is safe for concurrent
// use. It is a startstop.Service: New starts it, Stop stops it once the
// groups being committed are done, and Start starts it again.
type Batcher[Req, Res any] struct {
	startstop.BaseStartStop

	cfg    Config
	commit CommitFunc[Req, Res]
	calls  chan call[Req, Res]
	// running is the Done channel of the current (or last) run's context:
	// closed once the Batcher is told to stop. Nil before the first Start.
	running atomic.Pointer[<-chan struct{}]
	// slots holds a token for each group being committed, by a loop or
	// inline: at most Config.Committers.
	slots chan struct{}
}

// call is one submitted request waiting for its answer.
type call[Req, Res any] struct {
	ctx    context.Context
	req    Req
	answer chan answer[Res]
}

type answer[Res any] struct {
	res Res
	err error
}

// New returns a started Batcher that commits with commit; Stop (or Close)
// stops it. It panics if cfg does not resolve (Config.Resolve): a Batcher's
// bounds are written in code, and a bad one is a programming error, as
// River's own services treat theirs.
func New[Req, Res any](cfg Config, commit CommitFunc[Req, Res]) *Batcher[Req, Res] {
	cfg, err := cfg.Resolve()
	if err != nil {
		panic(err)
	}
	b := &Batcher[Req, Res]{cfg: cfg, commit: commit, calls: make(chan call[Req, Res]), slots: make(chan struct{}, cfg.Committers)}
	_ = b.Start(context.Background()) // never fails
	return b
}

// Start starts the commit loops, if they are not running. They stop when
// ctx ends or Stop is called.
func (b *Batcher[Req, Res]) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := b.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	done := ctx.Done()
	b.running.Store(&done)
	var loops sync.WaitGroup
	for range b.cfg.Committers {
		loops.Go(func() { b.loop(ctx) })
	}
	started()
	go func() {
		defer stopped()
		loops.Wait()
	}()
	return nil
}

// Close is Stop: it stops the Batcher once the groups being committed are
// done. Requests not yet taken by then are answered with ErrClosed.
func (b *Batcher[Req, Res]) Close() { b.Stop() }

// Submit commits req, possibly with others, and returns its result. If
// ctx ends before a commit loop takes req, req is not committed and
// Submit returns ctx's error. A commit is never cut short by its callers'
// contexts ending, but a caller need not wait for it: if ctx ends once
// req is taken, Submit returns an error wrapping ErrOutcomeUnknown (and
// ctx's cause), and the commit decides without it. A request committed
// inline (Config.Inline) is the exception: its commit is its own, and ends
// with ctx.
func (b *Batcher[Req, Res]) Submit(ctx context.Context, req Req) (Res, error) {
	var zero Res
	running := b.running.Load()
	if running == nil {
		return zero, ErrClosed
	}
	c := call[Req, Res]{ctx: ctx, req: req, answer: make(chan answer[Res], 1)}
	if b.cfg.Inline && len(b.slots) == 0 && b.tryTakeSlot() {
		return b.inline(c, *running)
	}
	select {
	case b.calls <- c:
	case <-*running:
		return zero, ErrClosed
	case <-ctx.Done():
		return zero, fmt.Errorf("batch: no commit loop took the request: %w", ctx.Err())
	}
	select {
	case a := <-c.answer: // always answered once taken (buffered)
		return a.res, a.err
	case <-ctx.Done():
		select {
		case a := <-c.answer: // an answer already there wins
			return a.res, a.err
		default:
			return zero, fmt.Errorf("%w: %w", ErrOutcomeUnknown, context.Cause(ctx))
		}
	}
}

// tryTakeSlot takes a commit slot if one is free.
func (b *Batcher[Req, Res]) tryTakeSlot() bool {
	select {
	case b.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// inline commits c in its caller's goroutine (Config.Inline), in a slot
// already taken. A failed commit whose caller has left meanwhile answers
// as a loop's would: its outcome is unknown.
func (b *Batcher[Req, Res]) inline(c call[Req, Res], stop <-chan struct{}) (Res, error) {
	defer func() { <-b.slots }()
	b.settle(c.ctx, stop, []call[Req, Res]{c})
	a := <-c.answer
	if a.err != nil && c.ctx.Err() != nil {
		var zero Res
		return zero, fmt.Errorf("%w: %w", ErrOutcomeUnknown, context.Cause(c.ctx))
	}
	return a.res, a.err
}

// loop commits groups until ctx (the run's) ends.
func (b *Batcher[Req, Res]) loop(ctx context.Context) {
	for {
		select {
		case first := <-b.calls:
			b.slots <- struct{}{} // an inline commit may hold the last one
			group := live(b.gather(first))
			// One client leaving must not cut short the others' commit.
			b.settle(context.WithoutCancel(first.ctx), ctx.Done(), group)
			<-b.slots
		case <-ctx.Done():
			return
		}
	}
}

// gather takes whatever else is already waiting, without waiting for more.
func (b *Batcher[Req, Res]) gather(first call[Req, Res]) []call[Req, Res] {
	group := []call[Req, Res]{first}
	for len(group) < b.cfg.MaxBatch {
		select {
		case c := <-b.calls:
			group = append(group, c)
		default:
			return group
		}
	}
	return group
}

// live answers the calls whose context has ended with its error, without
// committing them (their callers are gone), and returns the others.
func live[Req, Res any](group []call[Req, Res]) []call[Req, Res] {
	out := group[:0]
	for _, c := range group {
		if err := c.ctx.Err(); err != nil {
			c.answer <- answer[Res]{err: err}
			continue
		}
		out = append(out, c)
	}
	return out
}

// settle commits group with ctx and answers its calls. If the commit
// fails with an error Config.Retry accepts, it commits again the calls
// still waiting, until stop is closed or ctx ends; with an isolable error,
// it settles each half of the group on its own instead, so that the
// request at fault fails alone.
func (b *Batcher[Req, Res]) settle(ctx context.Context, stop <-chan struct{}, group []call[Req, Res]) {
	if len(group) == 0 {
		return
	}
	res, err := b.commitGroup(ctx, group)
	for pause := RetryPauseFirst; err != nil && b.cfg.Retry(err); pause = min(2*pause, RetryPauseMax) {
		if !wait(ctx, stop, pause) {
			break
		}
		if group = live(group); len(group) == 0 {
			return
		}
		res, err = b.commitGroup(ctx, group)
	}
	if err != nil && len(group) > 1 && b.cfg.Isolate(err) {
		half := len(group) / 2
		b.settle(ctx, stop, group[:half])
		b.settle(ctx, stop, group[half:])
		return
	}
	for i, c := range group {
		if err != nil {
			c.answer <- answer[Res]{err: err}
		} else {
			c.answer <- answer[Res]{res: res[i]}
		}
	}
}

// wait pauses for d; false if stop is closed or ctx ends first.
func wait(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// commitGroup runs the commit function on the group's requests.
func (b *Batcher[Req, Res]) commitGroup(ctx context.Context, group []call[Req, Res]) ([]Res, error) {
	reqs := make([]Req, len(group))
	for i, c := range group {
		reqs[i] = c.req
	}
	res, err := b.commit(ctx, reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("batch: commit returned %d results for %d requests", len(res), len(reqs))
	}
	return res, err
}
