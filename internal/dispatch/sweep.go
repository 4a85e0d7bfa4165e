package dispatch

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/store"
)

// SweepConfig configures a Sweeper.
type SweepConfig struct {
	// Interval is how often, across all worker processes, a sweep runs
	// (default 1s); negative turns the sweeper off (tests of what must hold
	// without it).
	Interval time.Duration
	// WalkInterval is how often, across all worker processes, a sweep
	// also walks every endpoint with deliveries queued, for those a crash
	// left without a dispatch job (default 5 × Interval); while each walk
	// finds as many as it may queue, the next sweep walks again, on from
	// the last endpoint the walk before found.
	WalkInterval time.Duration
	// RescueGrace is how long a job may show as running without its run
	// holding its lease before it counts as dead: the moment between River
	// fetching a job and the run taking its lease (default 3s).
	RescueGrace time.Duration
	// Nudger is what it nudges endpoints and rescues jobs through
	// (default: a Nudger of its own on the queue).
	Nudger *Nudger
	Logger *slog.Logger
}

// maxSweepEndpoints bounds the dispatch jobs one sweep queues (each in its
// own transaction); the rest wait for the next sweep.
const maxSweepEndpoints = 1000

// maxRescues bounds the dead jobs of each kind one sweep replaces.
const maxRescues = 100

// A Sweeper runs in every worker process and, about once per Interval
// across all of them (store.ClaimSweep), does two things:
//
//   - It replaces fan-out and dispatch jobs whose run died (a killed
//     process, a broken connection) with new jobs, as soon as their lease is
//     free (package lease), instead of after River's rescuer.
//   - It queues a dispatch job for every endpoint whose next retry is due:
//     a dispatch run ends when nothing is due and leaves on its endpoint
//     when its first queued retry will be (store.TakeRetriesDue), so the
//     sweep reads those endpoints alone.
//   - Every WalkInterval it walks every endpoint with deliveries queued
//     (store.EndpointsNeedingDispatch) and queues a dispatch job for those
//     with deliveries due and none queued: deliveries whose post, or whose
//     run, a crash cut short between two commits. The walk's cost grows
//     with the endpoints holding deliveries (throttled and circuit-open
//     ones too, 21 ms a walk beside 5,000), so it is not made every second.
//
// It does not depend on River's leader, which a killed process may have
// been, and never queues more than one job per transaction.
type Sweeper struct {
	store *store.Store
	jobs  *jobs.Queue
	cfg   SweepConfig
	more  bool      // the last walk queued as many as it may: walk again soon
	after uuid.UUID // where the next walk starts (walkFrom)
}

// NewSweeper returns a Sweeper queueing jobs on q.
func NewSweeper(st *store.Store, q *jobs.Queue, cfg SweepConfig) *Sweeper {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.WalkInterval == 0 {
		cfg.WalkInterval = 5 * cfg.Interval
	}
	if cfg.RescueGrace == 0 {
		cfg.RescueGrace = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Nudger == nil {
		cfg.Nudger = NewNudger(st, q, NudgerConfig{Logger: cfg.Logger})
	}
	return &Sweeper{store: st, jobs: q, cfg: cfg}
}

// Run sweeps until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	if s.cfg.Interval < 0 {
		return
	}
	for {
		// Each process asks a little more often than the interval, at
		// jittered times, so one of them claims each turn soon after it opens.
		wait := time.Duration(float64(s.cfg.Interval) * (0.5 + 0.25*rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			metrics.JobErrors.WithLabelValues("sweep").Inc()
			s.cfg.Logger.Warn("sweep failed", "err", err)
		}
	}
}

// Sweep runs one sweep if it is this process's turn.
func (s *Sweeper) Sweep(ctx context.Context) error {
	mine, err := s.store.ClaimSweep(ctx, "dispatch", s.cfg.Interval)
	if err != nil || !mine {
		return err
	}
	if err := s.rescue(ctx); err != nil {
		return err
	}
	ids, err := s.store.TakeRetriesDue(ctx, maxSweepEndpoints)
	if err != nil {
		return err
	}
	if err := s.cfg.Nudger.Nudge(ctx, ids); err != nil {
		return err // the walk finds them
	}
	return s.walk(ctx)
}

// walk queues dispatch for endpoints with deliveries due and no job, if it
// is this process's turn to walk.
func (s *Sweeper) walk(ctx context.Context) error {
	every := s.cfg.WalkInterval
	if s.more {
		every = s.cfg.Interval
	}
	mine, err := s.store.ClaimSweep(ctx, "dispatch-walk", every)
	if err != nil || !mine {
		return err
	}
	ids, err := s.store.EndpointsNeedingDispatch(ctx, maxSweepEndpoints, s.after)
	if err != nil {
		return err
	}
	s.more = len(ids) == maxSweepEndpoints
	if err := s.cfg.Nudger.Nudge(ctx, ids); err != nil {
		return err // the next walk starts where this one did
	}
	s.after = walkFrom(ids, maxSweepEndpoints)
	return nil
}

// walkFrom is where the walk after one that found ids starts: past the
// last of them if it found as many as it may (limit), for the rest of the
// endpoints, so that a drain over many endpoints walks each once instead
// of stepping past the ones already served every time (ten walks of 558 ms
// over 10,000 endpoints in drain-10k); from the first endpoint otherwise.
func walkFrom(ids []uuid.UUID, limit int) uuid.UUID {
	if len(ids) < limit {
		return uuid.Nil
	}
	return slices.MaxFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
}

// rescue replaces the jobs of dead runs: dispatch jobs first, since each
// holds back an endpoint's whole queue, one per transaction (their unique
// insert locks); then fan-out and bulk replay jobs together, many per
// transaction (plain inserts).
func (s *Sweeper) rescue(ctx context.Context) error {
	grace := s.cfg.RescueGrace
	for range maxRescues {
		n, err := s.store.RescueDeadJobs(ctx, []string{jobs.DispatchArgs{}.Kind()}, grace, 1, s.cfg.Nudger)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		s.rescued(n, "dispatch")
	}
	others := []string{jobs.FanoutArgs{}.Kind(), jobs.ReplayArgs{}.Kind()}
	n, err := s.store.RescueDeadJobs(ctx, others, grace, maxRescues, s.cfg.Nudger)
	if err == nil && n > 0 {
		s.rescued(n, strings.Join(others, " or "))
	}
	return err
}

func (s *Sweeper) rescued(n int, kind string) {
	metrics.JobsRescued.Add(float64(n))
	s.cfg.Logger.Info("replaced jobs whose runs died", "kind", kind, "jobs", n)
}
