package app

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sluice-dev/sluice/internal/alert"
	"github.com/sluice-dev/sluice/internal/circuit"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/fanout"
	"github.com/sluice-dev/sluice/internal/jobs"
	"github.com/sluice-dev/sluice/internal/mail"
	"github.com/sluice-dev/sluice/internal/retention"
	"github.com/sluice-dev/sluice/internal/sender"
	"github.com/sluice-dev/sluice/internal/store"
)

// sweepInterval is how often due retries are looked for.
const sweepInterval = time.Second

// Dispatch queue size, and how many of its runs may linger idle waiting for
// fan-out (half, so lingering never starves endpoints with work).
const (
	dispatchWorkers = 1000
	lingerMax       = dispatchWorkers / 2
)

// NewRiver returns the River client and a function that releases the
// workers' resources once the client has stopped. With workers false it
// only inserts jobs (an API-only process); otherwise it also works every
// queue.
func NewRiver(pool *pgxpool.Pool, st *store.Store, cfg config.Config, workers bool, logger *slog.Logger) (*river.Client[pgx.Tx], func(), error) {
	release := func() {}
	rc := &river.Config{
		Logger: logger,
		// Dispatch and sweep jobs are many and short-lived: keep the table small.
		CompletedJobRetentionPeriod: time.Hour,
	}
	if workers {
		waker := dispatch.NewWaker(lingerMax)
		dcfg := dispatch.Config{
			Waker:            waker,
			Sender:           sender.New(sender.Config{Timeout: cfg.DeliveryTimeout, AllowPrivate: cfg.AllowPrivateTargets}),
			DeliveryTimeout:  cfg.DeliveryTimeout,
			Retry:            dispatch.Retry{Schedule: cfg.RetrySchedule},
			ThrottleSchedule: cfg.ThrottleSchedule,
			Circuit:          circuit.Config{Threshold: cfg.CircuitThreshold, FirstProbe: cfg.CircuitProbe},
			Logger:           logger,
		}
		mailer, err := mail.New(mail.Config{URL: cfg.SMTPURL, From: cfg.SMTPFrom})
		if err != nil {
			return nil, nil, err
		}
		w := river.NewWorkers()
		river.AddWorker(w, alert.NewWorker(st, mailer, cfg.PublicURL))
		river.AddWorker(w, fanout.NewWorker(st, waker, logger))
		dispatcher := dispatch.NewWorker(st, dcfg)
		release = dispatcher.Close
		river.AddWorker(w, dispatcher)
		river.AddWorker(w, dispatch.NewSweepWorker(st, waker))
		river.AddWorker(w, retention.NewWorker(st, cfg.Retention))
		rc.Workers = w
		rc.Queues = map[string]river.QueueConfig{
			jobs.QueueFanout:      {MaxWorkers: 20},
			jobs.QueueDispatch:    {MaxWorkers: dispatchWorkers},
			jobs.QueueMaintenance: {MaxWorkers: 5},
		}
		// Fetch eagerly: River's default 100ms cooldown would cap throughput
		// at MaxWorkers per 100ms and add that much latency to every event.
		rc.FetchCooldown = 2 * time.Millisecond
		rc.FetchPollInterval = 50 * time.Millisecond
		// A dispatch run ends within its JobTimeout; one that has not after
		// that is on a dead worker, and River frees its endpoint for another.
		rc.JobTimeout = dcfg.JobTimeout()
		rc.RescueStuckJobsAfter = dcfg.JobTimeout() + 5*time.Second
		rc.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(sweepInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobs.SweepArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return jobs.RetentionArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	return client, release, err
}
