package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/maintenance"
	"github.com/sluice-dev/sluice/internal/notify"
	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/internal/send"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Dispatch queue size, and how many of its runs may linger idle waiting for
// fan-out (half, so lingering never starves endpoints with work).
const (
	dispatchWorkers = 1000
	lingerMax       = dispatchWorkers / 2
)

// workers is what a worker process runs besides River: the lease
// connection its runs hold, the sweeper, and the Nudger's listener and
// alarm.
type workers struct {
	leases   *jobs.LeaseHolder
	sweeper  *maintenance.Sweeper
	dispatch *dispatch.Worker
	nudger   *dispatch.Nudger
	sender   *send.Sender // its broker connections close with the workers
}

// close releases the workers' resources; call it after River has stopped.
func (w *workers) close() {
	if w == nil {
		return
	}
	w.dispatch.Close()
	w.sender.Close()
	w.leases.Stop()
}

// NewRiver returns the River client, the process's dispatch.Nudger and,
// when workers is true, the worker side of the process (nil otherwise: an
// API-only process only inserts jobs).
//
// The job policy is resolved here, once: each worker kind has its own
// timeout (dispatch from its resolved budget and delivery timeout, fan-out
// from its size, retention a fixed bound), failed fan-out and dispatch runs
// are retried within seconds (jobs.Backoff), and a fan-out or dispatch job
// whose run died is replaced by the sweeper as soon as its lease is free.
// River's own rescuer remains the backstop for the other kinds, after
// longer than any of those timeouts.
//
// River runs on pool but listens over session's connection; the leases and
// the Nudger's listener connect there too.
func NewRiver(pool *pgxpool.Pool, session *sessions, st *store.Store, cfg config.Config, withWorkers bool, tp *tracing.Provider, logger *slog.Logger) (*river.Client[pgx.Tx], *dispatch.Nudger, *workers, error) {
	rc := &river.Config{
		Logger: riverLogger(logger),
		// Dispatch jobs are many and short-lived: keep the table small.
		CompletedJobRetentionPeriod: time.Hour,
		// Fetch eagerly: River's default 100ms cooldown would cap throughput
		// at MaxWorkers per 100ms and add that much latency to every event.
		// It also spaces the insert notifications a client sends per queue,
		// so an API-only process needs it too: with the default, workers in
		// other processes heard of new fan-out jobs at most every 100 ms and
		// otherwise found them by polling.
		FetchCooldown: 2 * time.Millisecond,
	}
	if !withWorkers {
		client, err := river.NewClient(session.driver(pool), rc)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("make river client: %w", err)
		}
		return client, newNudger(session, st, client, 0, logger), nil, nil
	}
	leases, err := jobs.NewLeaseHolder(jobs.LeaseConfig{ConnConfig: session.conn, Logger: logger})
	if err != nil {
		return nil, nil, nil, err
	}
	w := &workers{leases: leases}
	mailer, err := notify.NewMailer(notify.MailConfig{URL: cfg.SMTPURL, From: cfg.SMTPFrom})
	if err != nil {
		return nil, nil, nil, err
	}
	w.sender = send.New(send.Config{Timeout: cfg.DeliveryTimeout, AllowPrivate: cfg.AllowPrivateTargets, EgressProxy: cfg.EgressProxy})
	dcfg := dispatch.Config{
		Leases:           w.leases,
		Sender:           w.sender,
		DeliveryTimeout:  cfg.DeliveryTimeout,
		Retry:            dispatch.Retry{Schedule: cfg.RetrySchedule},
		ThrottleSchedule: cfg.ThrottleSchedule,
		Circuit:          flow.CircuitConfig{Threshold: cfg.CircuitThreshold, FirstProbe: cfg.CircuitProbe},
		DisableAfter:     cfg.DisableAfter,
		Logger:           logger,
		Tracing:          tp,
	}
	if dcfg, err = dcfg.Resolve(); err != nil {
		return nil, nil, nil, err
	}
	// The workers are added once the client exists, as River allows: the
	// Nudger, which the dispatch and fan-out workers use, queues jobs with it.
	ws := river.NewWorkers()
	rc.Workers = ws
	// Inserts notify the workers (LISTEN/NOTIFY), so polling only finds
	// jobs that become due without an insert: retries and parked
	// dispatches, whose due time is a scheduled_at in the future. Polls
	// are what an idle worker spends its time on, so each queue polls
	// rarely. A parked endpoint's job is announced when its wait ends by the
	// alarm of the process that parked it (dispatch's alarm.go), and an
	// unparked one by Unpark, so the dispatch poll only backs those up, and
	// the rare insert River does not announce (two within its FetchCooldown
	// from one process, when no insert after them is announced either;
	// Nudger.Nudge inserts its jobs together for that reason). Fan-out's
	// finds its retries after a failed run (a database outage, whose
	// recovery takes seconds anyway). Bulk replay and maintenance jobs are
	// announced as they are inserted and wait for no one. Each poll costs
	// an idle process CPU (the idle scenario of make bench), so they are
	// no more frequent than these backups need.
	rc.Queues = map[string]river.QueueConfig{
		jobs.QueueFanout:      {MaxWorkers: 20, FetchPollInterval: time.Second},
		jobs.QueueDispatch:    {MaxWorkers: dispatchWorkers, FetchPollInterval: time.Second},
		jobs.QueueMaintenance: {MaxWorkers: 5, FetchPollInterval: 5 * time.Second},
		// Each bulk replay writes its deliveries in large chunks: two at a
		// time keep them from crowding out fan-out and dispatch.
		jobs.QueueReplay: {MaxWorkers: 2, FetchPollInterval: 5 * time.Second},
	}
	// Longer than any worker's own timeout (dispatch.Config.JobTimeout,
	// fanout.Timeout of the largest batch, maintenance.RetentionTimeout,
	// replay.Timeout), so River's rescuer never takes a live run's job.
	rc.RescueStuckJobsAfter = max(dcfg.JobTimeout(), fanout.Timeout(1000), maintenance.RetentionTimeout, replay.Timeout) + time.Minute
	rc.PeriodicJobs = []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return jobs.RetentionArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	client, err := river.NewClient(session.driver(pool), rc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("make river client: %w", err)
	}
	w.nudger = newNudger(session, st, client, lingerMax, logger)
	dcfg.Nudger = w.nudger
	if w.dispatch, err = dispatch.NewWorker(st, dcfg); err != nil {
		return nil, nil, nil, err
	}
	river.AddWorker(ws, notify.NewAlertWorker(st, mailer, cfg.PublicURL))
	river.AddWorker(ws, notify.NewMemberMailWorker(notify.MemberMailConfig{Store: st, Mailer: mailer, PublicURL: cfg.PublicURL,
		LogLinks: cfg.DevMailLog, Logger: logger}))
	river.AddWorker(ws, fanout.NewWorker(st, w.nudger, w.leases, logger))
	river.AddWorker(ws, w.dispatch)
	river.AddWorker(ws, dispatch.NewVerifyWorker(w.dispatch))
	river.AddWorker(ws, replay.NewWorker(st, w.nudger, w.leases, logger))
	retention, err := maintenance.NewRetentionWorker(st, maintenance.RetentionConfig{Delivered: cfg.Retention, Dead: cfg.DeadRetention, Audit: cfg.AuditRetention})
	if err != nil {
		return nil, nil, nil, err
	}
	river.AddWorker(ws, retention)
	if w.sweeper, err = maintenance.NewSweeper(st, maintenance.SweeperConfig{Interval: cfg.SweepInterval, Nudger: w.nudger, Logger: logger}); err != nil {
		return nil, nil, nil, err
	}
	return client, w.nudger, w, nil
}

// newNudger builds the process's one dispatch.Nudger, on the jobs client
// inserts. Every part of the process that starts or wakes a dispatch run
// is given this one. Its listener hears wakes from other processes, for
// the runs of a worker process and the poll requests waiting in an API
// process; maxLinger is how many runs may linger (0 in a process without
// runs).
func newNudger(session *sessions, st *store.Store, client *river.Client[pgx.Tx], maxLinger int, logger *slog.Logger) *dispatch.Nudger {
	return dispatch.NewNudger(st, jobs.NewQueue(client), dispatch.NudgerConfig{
		MaxLinger: maxLinger, ConnConfig: session.conn, Logger: logger,
	})
}
