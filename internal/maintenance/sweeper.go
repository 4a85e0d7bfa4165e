package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivershared/startstop"
	"github.com/riverqueue/river/rivershared/testsignal"

	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/store"
)

// Defaults of SweeperConfig's fields.
const (
	DefaultSweepInterval = time.Second
	DefaultReplaceGrace  = 3 * time.Second
	// DefaultCertificateInterval is how often client certificates are
	// checked for expiry: an announcement is at most this late.
	DefaultCertificateInterval = time.Hour
)

// SweeperConfig configures a Sweeper.
type SweeperConfig struct {
	// Interval is how often, across all worker processes, a sweep runs
	// (default DefaultSweepInterval); negative turns the sweeper off
	// (tests of what must hold without it).
	Interval time.Duration
	// WalkInterval is how often, across all worker processes, a sweep
	// also walks every endpoint with deliveries queued, for those a crash
	// left without a dispatch job (default 5 × Interval); while each walk
	// finds as many as it may queue, the next sweep walks again, on from
	// the last endpoint the walk before found.
	WalkInterval time.Duration
	// BacklogInterval is how often, across all worker processes, a sweep
	// also checks the endpoints with a backlog alert (default 5 ×
	// Interval): how late an alert can be.
	BacklogInterval time.Duration
	// CertificateInterval is how often, across all worker processes, a
	// sweep also checks the endpoints' client certificates for expiry
	// (default DefaultCertificateInterval).
	CertificateInterval time.Duration
	// ReplaceGrace is how long a job may show as running without its run
	// holding its lease before it counts as dead: the moment between River
	// fetching a job and the run taking its lease (default
	// DefaultReplaceGrace).
	ReplaceGrace time.Duration
	// Nudger starts or wakes the dispatch runs of the endpoints a sweep
	// finds, replaces the jobs of dead runs and queues the backlog alerts'
	// jobs: the process's, built once by app. Required: a nil Nudger is a
	// programming error.
	Nudger *dispatch.Nudger
	// Clock paces the sweeps (default jobs.SystemClock).
	Clock  jobs.Clock
	Logger *slog.Logger
}

// Resolve returns c with its defaults set, or an error if it is not
// valid.
func (c SweeperConfig) Resolve() (SweeperConfig, error) {
	c.Interval = cmp.Or(c.Interval, DefaultSweepInterval)
	c.WalkInterval = cmp.Or(c.WalkInterval, 5*c.Interval)
	c.BacklogInterval = cmp.Or(c.BacklogInterval, 5*c.Interval)
	c.CertificateInterval = cmp.Or(c.CertificateInterval, DefaultCertificateInterval)
	c.ReplaceGrace = cmp.Or(c.ReplaceGrace, DefaultReplaceGrace)
	c.Clock = cmp.Or(c.Clock, jobs.SystemClock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, c.validate()
}

func (c SweeperConfig) validate() error {
	if c.Interval < 0 { // off: nothing else is used
		return nil
	}
	switch {
	case c.Nudger == nil:
		return errors.New("sweeper: Nudger is required")
	case c.WalkInterval < 0:
		return fmt.Errorf("sweeper: WalkInterval must be positive, not %s", c.WalkInterval)
	case c.BacklogInterval < 0:
		return fmt.Errorf("sweeper: BacklogInterval must be positive, not %s", c.BacklogInterval)
	case c.CertificateInterval < 0:
		return fmt.Errorf("sweeper: CertificateInterval must be positive, not %s", c.CertificateInterval)
	case c.ReplaceGrace < 0:
		return fmt.Errorf("sweeper: ReplaceGrace must be positive, not %s", c.ReplaceGrace)
	}
	return nil
}

// maxSweepEndpoints bounds the dispatch jobs one sweep queues (each in its
// own transaction); the rest wait for the next sweep.
const maxSweepEndpoints = 1000

// maxReplaced bounds the dead runs' jobs of each kind one sweep replaces.
const maxReplaced = 100

// A Sweeper runs in every worker process and, about once per Interval
// across all of them (claimSweeps), does these things:
//
//   - It replaces fan-out, dispatch and bulk replay jobs whose run died (a
//     killed process, a broken connection) with new jobs, as soon as their
//     lease is free (jobs.ReplaceDead), instead of after River's rescuer.
//   - It queues a dispatch job for every endpoint whose next retry is due:
//     a dispatch run ends when nothing is due and leaves on its endpoint
//     when its first queued retry will be (TakeRetriesDue), so the
//     sweep reads those endpoints alone.
//   - Every WalkInterval it walks up to maxSweepEndpoints endpoints with
//     deliveries queued (jobs.EndpointsNeedingDispatch), going on where the
//     last walk stopped, and queues a dispatch job for those with
//     deliveries due and none queued: deliveries whose post, or whose run,
//     a crash cut short between two commits. A walk's cost grows with the
//     endpoints it looks at (throttled and circuit-open ones too), so it
//     looks at a bounded number and is not made every second.
//   - Every BacklogInterval it checks the endpoints with a backlog alert
//     (checkBacklogs).
//   - Every CertificateInterval it checks the endpoints' client
//     certificates for expiry (checkCertificates).
//
// It does not depend on River's leader, which a killed process may have
// been, and never queues more than one job per transaction. It is a
// startstop.Service.
type Sweeper struct {
	startstop.BaseStartStop

	store *store.Store
	cfg   SweeperConfig
	more  bool      // every endpoint the last walk looked at needed a job: walk again soon
	after uuid.UUID // where the next walk starts (jobs.Walk.Last)

	testSignals sweeperTestSignals
}

// sweeperTestSignals let tests wait for what the sweeper's loop did.
type sweeperTestSignals struct {
	swept testsignal.TestSignal[error] // a turn of the loop ended, with Sweep's error
}

// NewSweeper returns a Sweeper on st that starts runs with cfg.Nudger;
// Start starts it.
func NewSweeper(st *store.Store, cfg SweeperConfig) (*Sweeper, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return &Sweeper{store: st, cfg: cfg}, nil
}

// Start sweeps, about every Interval, until Stop or until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := s.StartInit(ctx)
	if !shouldStart {
		return nil
	}
	if s.cfg.Interval < 0 { // off
		started()
		stopped()
		return nil
	}
	go func() {
		started()
		defer stopped()
		for {
			// Each process asks a little more often than the interval, at
			// jittered times, so one of them claims each turn soon after it opens.
			wait := time.Duration(float64(s.cfg.Interval) * (0.5 + 0.25*rand.Float64()))
			tick, stop := s.cfg.Clock.After(wait)
			select {
			case <-ctx.Done():
				stop()
				return
			case <-tick:
			}
			err := s.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				metrics.JobErrors.WithLabelValues("sweep").Inc()
				s.cfg.Logger.Warn("sweep failed", "err", err)
			}
			s.testSignals.swept.Signal(err)
		}
	}()
	return nil
}

// Sweep runs the parts of a sweep whose turn this process takes: all of
// them are asked for in one statement (claimSweeps), so an idle process
// makes one round trip a tick, whichever turns are due.
func (s *Sweeper) Sweep(ctx context.Context) error {
	walkEvery := s.cfg.WalkInterval
	if s.more {
		walkEvery = s.cfg.Interval
	}
	mine, err := claimSweeps(ctx, s.store, []sweepTurn{
		{"dispatch", s.cfg.Interval},
		{"dispatch-walk", walkEvery},
		{"backlog", s.cfg.BacklogInterval},
		{"certificates", s.cfg.CertificateInterval},
	})
	if err != nil {
		return fmt.Errorf("take the sweep's turns: %w", err)
	}
	var errs []error
	if mine["dispatch"] {
		errs = append(errs, s.dispatchDue(ctx))
	}
	if mine["dispatch-walk"] {
		errs = append(errs, s.walk(ctx))
	}
	if mine["backlog"] {
		errs = append(errs, s.checkBacklogs(ctx))
	}
	if mine["certificates"] {
		errs = append(errs, s.checkCertificates(ctx))
	}
	return errors.Join(errs...)
}

// dispatchDue replaces the jobs of dead runs and queues dispatch for the
// endpoints whose next retry is due.
func (s *Sweeper) dispatchDue(ctx context.Context) error {
	if err := s.replaceDead(ctx); err != nil {
		return err
	}
	// Each sweep statement runs alone on the pool (store.OneShot): one
	// round trip, no transaction around it, as an idle process should.
	ids, err := s.store.OneShot(nil).TakeRetriesDue(ctx, maxSweepEndpoints)
	if err != nil {
		return fmt.Errorf("dispatch retries due: %w", err)
	}
	if err := s.cfg.Nudger.Nudge(ctx, ids); err != nil {
		return fmt.Errorf("dispatch retries due: %w", err) // the walk finds them
	}
	return nil
}

// walk queues dispatch for endpoints with deliveries due and no job. It
// looks at up to maxSweepEndpoints endpoints with deliveries queued, going
// on where the last walk stopped, so a walk costs as much with thousands
// of endpoints held by a throttle or an open circuit as with none. It
// walks again a sweep later when every endpoint it looked at needed a job
// (a crash left many unserved), and otherwise at WalkInterval.
func (s *Sweeper) walk(ctx context.Context) error {
	w, err := jobs.EndpointsNeedingDispatch(ctx, s.store.Pool(), maxSweepEndpoints, s.after)
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	s.more = len(w.Due) == maxSweepEndpoints
	if err := s.cfg.Nudger.Nudge(ctx, w.Due); err != nil {
		return fmt.Errorf("walk: dispatch the endpoints found: %w", err) // the next walk starts where this one did
	}
	s.after = w.Last
	return nil
}

// replaceDead replaces the jobs of dead runs. It asks first, in one
// statement, which kinds have any (an idle sweep stops there); then
// dispatch jobs, since each holds back an endpoint's whole queue, one per
// transaction (their unique insert locks); then fan-out and bulk replay
// jobs together, many per transaction (plain inserts).
func (s *Sweeper) replaceDead(ctx context.Context) error {
	dispatch := jobs.DispatchArgs{}.Kind()
	dead, err := s.cfg.Nudger.DeadKinds(ctx, []string{dispatch, jobs.FanoutArgs{}.Kind(), jobs.ReplayArgs{}.Kind()}, s.cfg.ReplaceGrace)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if slices.Contains(dead, dispatch) {
		for range maxReplaced {
			n, err := s.replaceDeadTx(ctx, []string{dispatch}, 1)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			s.replaced(n, []string{dispatch})
		}
	}
	others := slices.DeleteFunc(dead, func(k string) bool { return k == dispatch })
	if len(others) == 0 {
		return nil
	}
	n, err := s.replaceDeadTx(ctx, others, maxReplaced)
	if n > 0 {
		s.replaced(n, others)
	}
	return err
}

// replaceDeadTx replaces up to limit dead runs' jobs of the kinds in one
// transaction.
func (s *Sweeper) replaceDeadTx(ctx context.Context, kinds []string, limit int) (int, error) {
	n, err := s.cfg.Nudger.ReplaceDead(ctx, kinds, s.cfg.ReplaceGrace, limit)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

func (s *Sweeper) replaced(n int, kinds []string) {
	metrics.JobsReplaced.Add(float64(n))
	s.cfg.Logger.Info("replaced jobs whose runs died", "kind", strings.Join(kinds, " or "), "jobs", n)
}

// sweepTurn is a part of the sweep, by its row in table sweeps, and how
// often, across all processes, it runs.
type sweepTurn struct {
	name  string
	every time.Duration
}

// claimSweeps reports which of the turns this process takes now: those
// it is the first to ask for since at least every ago (table sweeps).
func claimSweeps(ctx context.Context, st *store.Store, turns []sweepTurn) (map[string]bool, error) {
	names, secs := make([]string, len(turns)), make([]float64, len(turns))
	for i, t := range turns {
		names[i], secs[i] = t.name, t.every.Seconds()
	}
	rows, err := st.Pool().Query(ctx, // alone on the pool: one statement, every tick
		`UPDATE sweeps s SET swept_at = now()
		FROM unnest($1::text[], $2::float8[]) AS t(name, secs)
		WHERE s.name = t.name AND s.swept_at <= now() - make_interval(secs => t.secs)
		RETURNING s.name`, names, secs)
	if err != nil {
		return nil, fmt.Errorf("claim sweeps: %w", err)
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("claim sweeps: %w", err)
	}
	mine := make(map[string]bool, len(taken))
	for _, name := range taken {
		mine[name] = true
	}
	return mine, nil
}
