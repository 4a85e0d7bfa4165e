package batch

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rejected is the error fakeDB returns for a negative request: one row's
// fault, like a Postgres data exception.
type rejected struct{ req int }

func (e rejected) Error() string { return fmt.Sprintf("request %d rejected", e.req) }

func isRejected(err error) bool { return errors.As(err, new(rejected)) }

var errDown = errors.New("database is down")

// fakeDB commits int requests all or nothing: a group holding a negative
// request fails with rejected (naming the first one); every group fails
// with down when it is set. A committed request's result is ten times it.
type fakeDB struct {
	mu        sync.Mutex
	down      error
	downTries int           // the next downTries commits fail with errDown
	gate      chan struct{} // when set, commits wait for it to close
	calls     int
	committed map[int]int
}

func newFakeDB() *fakeDB { return &fakeDB{committed: map[int]int{}} }

func (f *fakeDB) commit(_ context.Context, reqs []int) ([]int, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down != nil {
		return nil, f.down
	}
	if f.downTries > 0 {
		f.downTries--
		return nil, errDown
	}
	for _, r := range reqs {
		if r < 0 {
			return nil, rejected{r}
		}
	}
	out := make([]int, len(reqs))
	for i, r := range reqs {
		f.committed[r]++
		out[i] = r * 10
	}
	return out, nil
}

// group builds calls for reqs as a commit loop would have gathered them.
func group(ctx context.Context, reqs ...int) []call[int, int] {
	out := make([]call[int, int], len(reqs))
	for i, r := range reqs {
		out[i] = call[int, int]{ctx: ctx, req: r, answer: make(chan answer[int], 1)}
	}
	return out
}

// requireAnswers checks that every good request of g was committed once and
// answered with its result, and every bad one failed with its own error.
func requireAnswers(t *testing.T, db *fakeDB, g []call[int, int]) {
	t.Helper()
	for _, c := range g {
		a := <-c.answer
		if c.req < 0 {
			require.Equal(t, rejected{c.req}, a.err, "a bad request fails alone, with its own error")
			require.Zero(t, db.committed[c.req])
			continue
		}
		require.NoError(t, a.err)
		require.Equal(t, c.req*10, a.res)
		require.Equal(t, 1, db.committed[c.req], "committed exactly once")
	}
}

func mustResolve(t *testing.T, c Config) Config {
	t.Helper()
	c, err := c.Resolve()
	require.NoError(t, err)
	return c
}

func TestConfigResolve(t *testing.T) {
	t.Parallel()
	c := mustResolve(t, Config{})
	require.Equal(t, DefaultCommitters, c.Committers)
	require.Equal(t, DefaultMaxBatch, c.MaxBatch)
	require.False(t, c.Isolate(errDown), "without Isolate nothing is split")
	_, err := Config{Committers: -1}.Resolve()
	require.ErrorContains(t, err, "Committers must be positive")
	_, err = Config{MaxBatch: -1}.Resolve()
	require.ErrorContains(t, err, "MaxBatch must be positive")
	require.Panics(t, func() { New(Config{MaxBatch: -1}, newFakeDB().commit) }, "a bad bound in code fails at once")
}

// TestStopAndStartAgain: a stopped Batcher refuses requests, and commits
// them again once started again (the startstop.Service contract).
func TestStopAndStartAgain(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	b := New(Config{}, db.commit)
	res, err := b.Submit(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, 10, res)

	b.Stop()
	b.Stop() // twice is fine
	_, err = b.Submit(context.Background(), 2)
	require.ErrorIs(t, err, ErrClosed)

	require.NoError(t, b.Start(context.Background()))
	<-b.Started()
	res, err = b.Submit(context.Background(), 3)
	require.NoError(t, err)
	require.Equal(t, 30, res)

	// Its start context ending stops it too.
	b.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, b.Start(ctx))
	stopped := b.Stopped()
	cancel()
	<-stopped
	_, err = b.Submit(context.Background(), 4)
	require.ErrorIs(t, err, ErrClosed)
	b.Stop()
}

func TestOneBadRequestFailsAlone(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	b := &Batcher[int, int]{cfg: mustResolve(t, Config{Isolate: isRejected}), commit: db.commit}
	g := group(context.Background(), 0, 1, 2, 3, 4, 5, -6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	b.settle(context.Background(), nil, g)
	requireAnswers(t, db, g)
	require.LessOrEqual(t, db.calls, 2*bits.Len(uint(len(g)))+1, "bisection costs about 2·log2(n) commits")
}

func TestSeveralBadRequestsFailAlone(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	b := &Batcher[int, int]{cfg: mustResolve(t, Config{Isolate: isRejected}), commit: db.commit}
	g := group(context.Background(), -1, 2, 3, -4, -5, 6, 7, 8, 9, 10, -11, 12, 13)
	b.settle(context.Background(), nil, g)
	requireAnswers(t, db, g)

	db = newFakeDB()
	b.commit = db.commit
	g = group(context.Background(), -1, -2, -3)
	b.settle(context.Background(), nil, g)
	requireAnswers(t, db, g)
}

func TestNonIsolableErrorFailsGroupAtOnce(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	db.down = errDown
	b := &Batcher[int, int]{cfg: mustResolve(t, Config{Isolate: isRejected}), commit: db.commit}
	g := group(context.Background(), 1, 2, -3, 4, 5, 6, 7, 8)
	b.settle(context.Background(), nil, g)
	for _, c := range g {
		require.ErrorIs(t, (<-c.answer).err, errDown)
	}
	require.Equal(t, 1, db.calls, "no bisection during an outage")

	db = newFakeDB()
	b = &Batcher[int, int]{cfg: mustResolve(t, Config{}), commit: db.commit}
	g = group(context.Background(), 1, -2, 3)
	b.settle(context.Background(), nil, g)
	for _, c := range g {
		require.Equal(t, rejected{-2}, (<-c.answer).err)
	}
	require.Equal(t, 1, db.calls, "without Isolate nothing is split")
}

// TestRetryCommitsAgainWhileCallersWait: a commit that fails with an
// error Retry accepts (nothing was committed: no server took writes) is
// made again, with only the calls whose callers still wait, until it
// commits; each request is committed once. Closing stop ends the retries
// with the error.
func TestRetryCommitsAgainWhileCallersWait(t *testing.T) {
	t.Parallel()
	isDown := func(err error) bool { return errors.Is(err, errDown) }
	db := newFakeDB()
	db.downTries = 3
	b := &Batcher[int, int]{cfg: mustResolve(t, Config{Isolate: isRejected, Retry: isDown}), commit: db.commit}
	left, leave := context.WithCancel(context.Background())
	leave()
	g := append(group(context.Background(), 1, 2, 3), group(left, 4)...)
	b.settle(context.Background(), nil, g)
	requireAnswers(t, db, g[:3])
	require.ErrorIs(t, (<-g[3].answer).err, context.Canceled, "a caller gone is not committed again")
	require.Zero(t, db.committed[4])
	require.Equal(t, 4, db.calls, "three failed tries, then the commit")

	db = newFakeDB()
	db.down = errDown
	b.commit = db.commit
	stop := make(chan struct{})
	g = group(context.Background(), 5, 6)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		b.settle(context.Background(), stop, g)
	}()
	require.Eventually(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.calls >= 2
	}, 10*time.Second, 10*time.Millisecond, "tried again while the database is down")
	close(stop)
	<-settled
	for _, c := range g {
		require.ErrorIs(t, (<-c.answer).err, errDown, "stopping answers the error")
	}
}

func TestCancelledRequestsAreNotCommitted(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	b := New(Config{}, db.commit)
	defer b.Close()

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 { // whether refused at hand-off or when its group is taken
		_, err := b.Submit(gone, i)
		require.ErrorIs(t, err, context.Canceled)
	}
	g := append(group(gone, 1), group(context.Background(), 2)...)
	first := g[0] // live filters g in place
	rest := live(g)
	require.ErrorIs(t, (<-first.answer).err, context.Canceled)
	require.Len(t, rest, 1)
	require.Equal(t, 2, rest[0].req)

	db.mu.Lock()
	defer db.mu.Unlock()
	require.Zero(t, db.calls, "nothing of a gone caller was committed")
}

func TestCommitOutlivesCallerContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	started, finish := make(chan struct{}), make(chan struct{})
	committed := make(chan error, 1)
	b := New(Config{Committers: 1}, func(cctx context.Context, reqs []int) ([]int, error) {
		close(started)
		<-finish // the caller leaves mid-commit
		committed <- cctx.Err()
		return reqs, cctx.Err()
	})
	defer b.Close()
	go func() { <-started; cancel() }()
	_, err := b.Submit(ctx, 7)
	require.ErrorIs(t, err, ErrOutcomeUnknown, "a caller that leaves mid-commit is not told it failed")
	require.ErrorIs(t, err, context.Canceled)
	close(finish)
	require.NoError(t, <-committed, "the commit went on without its caller")
}

// With Inline, a request that finds no commit under way is committed in
// its caller's goroutine under the caller's context: a caller that leaves
// cuts its own commit short and is told its outcome is unknown.
func TestInlineCommitEndsWithItsCaller(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	b := New(Config{Committers: 1, Inline: true}, func(cctx context.Context, reqs []int) ([]int, error) {
		close(started)
		select {
		case <-cctx.Done(): // only the caller's context can end this commit
			return nil, cctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("the commit outlived its caller")
		}
	})
	defer b.Close()
	go func() { <-started; cancel() }()
	_, err := b.Submit(ctx, 7)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.Canceled)
}

// While an inline commit is under way, other requests go to the loops, as
// without Inline, within the slots it leaves (Committers).
func TestInlineLeavesTheRestToTheLoops(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	first, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var groups [][]int
	var inline []bool // per commit: under a caller's (cancellable) context
	b := New(Config{Committers: 2, Inline: true}, func(cctx context.Context, reqs []int) ([]int, error) {
		if reqs[0] == 0 {
			close(first)
			<-release
		}
		mu.Lock()
		groups = append(groups, reqs)
		inline = append(inline, cctx.Done() != nil)
		mu.Unlock()
		return db.commit(cctx, reqs)
	})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := b.Submit(ctx, 0)
		require.NoError(t, err)
		require.Zero(t, res)
	})
	<-first
	const n = 40
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			res, err := b.Submit(ctx, i)
			require.NoError(t, err)
			require.Equal(t, i*10, res)
		})
	}
	require.Eventually(t, func() bool { // committed while the first is held
		db.mu.Lock()
		defer db.mu.Unlock()
		return len(db.committed) == n
	}, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	last := len(groups) - 1
	require.Equal(t, []int{0}, groups[last], "the first request was committed alone")
	require.True(t, inline[last], "under its caller's context")
	require.NotContains(t, inline[:last], true, "the others by the loop")
	db.mu.Lock()
	defer db.mu.Unlock()
	require.Len(t, db.committed, n+1)
	for req, times := range db.committed {
		require.Equal(t, 1, times, "request %d committed once", req)
	}
	t.Logf("%d requests, %d commits", n+1, len(groups))
}

// An inline commit that Config.Retry accepts is tried again until its
// caller leaves, which then hears that the outcome is unknown.
func TestInlineRetryEndsWithItsCaller(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	db.down = errDown
	b := New(Config{Retry: func(err error) bool { return errors.Is(err, errDown) }, Inline: true}, db.commit)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			db.mu.Lock()
			tried := db.calls
			db.mu.Unlock()
			if tried >= 2 {
				cancel()
				return
			}
			runtime.Gosched()
		}
	}()
	_, err := b.Submit(ctx, 1)
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.Canceled)
}

func TestCloseDrains(t *testing.T) {
	t.Parallel()
	db := newFakeDB()
	db.gate = make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	var held atomic.Int64 // requests taken into commits, which wait for the gate
	b := New(Config{Committers: 2}, func(ctx context.Context, reqs []int) ([]int, error) {
		once.Do(func() { close(started) })
		held.Add(int64(len(reqs)))
		return db.commit(ctx, reqs)
	})

	const n = 50
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		answered, shut int
	)
	for i := range n {
		wg.Go(func() {
			_, err := b.Submit(context.Background(), i)
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, ErrClosed) {
				shut++
				return
			}
			require.NoError(t, err)
			answered++
		})
	}
	<-started
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	// Once every request is refused (Close has stopped the Batcher) or held
	// in a commit, the commits are all Close has left to wait for.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return shut+int(held.Load()) == n
	}, 10*time.Second, time.Millisecond, "every request refused or held")
	select {
	case <-closed:
		t.Fatal("Close returned with commits in flight")
	default:
	}
	close(db.gate)
	<-closed
	wg.Wait()

	require.Equal(t, n, answered+shut, "every Submit returned")
	require.Equal(t, answered, len(db.committed), "answered ok exactly when committed")
	_, err := b.Submit(context.Background(), 1)
	require.ErrorIs(t, err, ErrClosed)
}

func TestConcurrentSubmits(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%t", inline), func(t *testing.T) {
			t.Parallel()
			testConcurrentSubmits(t, Config{Committers: 3, MaxBatch: 32, Isolate: isRejected, Inline: inline})
		})
	}
}

func testConcurrentSubmits(t *testing.T, cfg Config) {
	db := newFakeDB()
	b := New(cfg, db.commit)
	defer b.Close()

	const n = 3000
	var wg sync.WaitGroup
	for i := range n {
		req := i
		if i%97 == 0 {
			req = -i - 1
		}
		wg.Go(func() {
			res, err := b.Submit(context.Background(), req)
			if req < 0 {
				require.Equal(t, rejected{req}, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, req*10, res)
		})
	}
	wg.Wait()

	db.mu.Lock()
	defer db.mu.Unlock()
	require.Len(t, db.committed, n-(n+96)/97)
	for req, times := range db.committed {
		require.Equal(t, 1, times, "request %d committed once", req)
	}
	t.Logf("%d requests, %d commits", n, db.calls)
}

func TestShortResultIsAnError(t *testing.T) {
	t.Parallel()
	b := New(Config{}, func(context.Context, []int) ([]int, error) { return nil, nil })
	defer b.Close()
	_, err := b.Submit(context.Background(), 1)
	require.ErrorContains(t, err, "0 results for 1 requests")
}

// BenchmarkSubmit measures what the batcher adds per request: hand-off,
// gathering and answering, around a commit that does nothing.
func BenchmarkSubmit(b *testing.B) {
	bt := New(Config{}, func(_ context.Context, reqs []int) ([]int, error) { return reqs, nil })
	defer bt.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bt.Submit(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
