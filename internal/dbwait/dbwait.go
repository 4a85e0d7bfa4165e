// Package dbwait bounds how long an API request waits on the database, and
// tells, once the bound is reached, whether the request may have committed
// something meanwhile.
//
// Bound gives each request a budget of time spent waiting on the
// database: acquiring a connection, and running statements, batches and
// COPYs, as Tracer (installed on the pool) sees them, and any other wait
// a handler declares with Wait (an event committed by the group-commit
// loop on its behalf). Reading the request's body and the handler's own
// work do not count. When the budget runs out the request's context is
// cancelled with ErrTimeout as its cause: pgx gives up on the acquire or
// the statement at once, and the handler answers 503 (Exceeded tells it
// why). statement_timeout cannot do this: during a partition the client
// waits on a socket the server never answers.
//
// Tracer also marks the request's context when a commit is sent on its
// behalf (an explicit COMMIT, or a statement that may write outside a
// transaction), so that the 503 can say whether the outcome is unknown
// (CommitSent) or nothing was done.
package dbwait

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTimeout is the bound SLUICE_DB_TIMEOUT defaults to.
const DefaultTimeout = 5 * time.Second

// ErrTimeout is the cause of a request context ended by its budget.
var ErrTimeout = errors.New("dbwait: the database did not answer within the request's bound")

// Exceeded reports whether ctx ended because its request's budget ran out.
func Exceeded(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrTimeout)
}

// Bound returns middleware that gives each request a budget of d (see the
// package comment) and watches for commits sent on its behalf.
func Bound(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, stop := WithBudget(r.Context(), d)
			defer stop()
			next.ServeHTTP(w, r.WithContext(WatchCommit(ctx)))
		})
	}
}

// budget is a request's time left for waiting on the database. Its clock
// runs while at least one wait is under way.
type budget struct {
	mu     sync.Mutex
	left   time.Duration // as of since, while waits are under way
	since  time.Time
	active int // waits under way
	over   bool
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

type budgetKey struct{}

// WithBudget returns a context cancelled with ErrTimeout once its waits on
// the database (Tracer, Wait) have taken d in all; stop releases it.
func WithBudget(parent context.Context, d time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	b := &budget{left: d, cancel: cancel}
	b.timer = time.AfterFunc(time.Duration(math.MaxInt64), b.expire) // started by enter
	b.timer.Stop()
	return context.WithValue(ctx, budgetKey{}, b), func() {
		b.mu.Lock()
		b.over = true
		b.timer.Stop()
		b.mu.Unlock()
		cancel(context.Canceled)
	}
}

func (b *budget) expire() {
	b.mu.Lock()
	b.over = true
	b.mu.Unlock()
	b.cancel(ErrTimeout)
}

// enter starts a wait: the clock runs.
func (b *budget) enter() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active++
	if b.active == 1 && !b.over {
		b.since = time.Now()
		b.timer.Reset(b.left)
	}
}

// leave ends a wait: when none is left, the clock stops.
func (b *budget) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == 0 {
		return
	}
	b.active--
	if b.active == 0 && !b.over && b.timer.Stop() {
		b.left -= time.Since(b.since)
	}
}

func budgetFrom(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// Wait declares a wait on the database that Tracer does not see, made for
// ctx's request (e.g. for a commit another goroutine makes for it); call
// done when it ends. Without a budget in ctx it does nothing.
func Wait(ctx context.Context) (done func()) {
	b := budgetFrom(ctx)
	if b == nil {
		return func() {}
	}
	b.enter()
	var once sync.Once
	return func() { once.Do(b.leave) }
}

type commitKey struct{}

// commitWatch is what Tracer saw of the statements sent with a context.
type commitWatch struct {
	traced atomic.Bool // a statement, batch or COPY was sent
	sent   atomic.Bool // one of them may have committed
}

// WatchCommit returns ctx marked to record commits sent with it (by
// Tracer); CommitSent reads the mark.
func WatchCommit(ctx context.Context) context.Context {
	return context.WithValue(ctx, commitKey{}, new(commitWatch))
}

// CommitSent reports whether a commit was sent with ctx (or a context
// derived from it) since WatchCommit: if the request then failed on the
// database, its outcome is unknown.
func CommitSent(ctx context.Context) bool {
	w, _ := ctx.Value(commitKey{}).(*commitWatch)
	return w != nil && w.sent.Load()
}

// NoCommitSent reports whether Tracer saw statements sent with ctx since
// WatchCommit and none of them may have committed: if the work then failed
// on the database, it did nothing. False when Tracer saw nothing (it may
// not be installed on the pool).
func NoCommitSent(ctx context.Context) bool {
	w, _ := ctx.Value(commitKey{}).(*commitWatch)
	return w != nil && w.traced.Load() && !w.sent.Load()
}

// markCommit records a commit on ctx's watch, if it has one.
func markCommit(ctx context.Context) {
	if w, ok := ctx.Value(commitKey{}).(*commitWatch); ok {
		w.sent.Store(true)
	}
}

// markTraced records on ctx's watch, if it has one, that a statement was
// sent.
func markTraced(ctx context.Context) {
	if w, ok := ctx.Value(commitKey{}).(*commitWatch); ok {
		w.traced.Store(true)
	}
}
