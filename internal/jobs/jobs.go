// Package jobs is Sluice's side of River: the only package that inserts
// or completes jobs and reads or writes River's tables (migrations aside).
// It holds:
//
//   - the kinds of job, with their queues and insert options (FanoutArgs,
//     DispatchArgs, ReplayArgs, AlertArgs, MemberMailArgs, RetentionArgs)
//     and Backoff;
//   - Queue, which inserts them inside a caller's transaction, so that a
//     job commits with the data it acts on;
//   - LiveStates, the one list of the states in which a job will still
//     run, and the statements that ask which endpoints or events have a
//     live job (LiveDispatch, EndpointsNeedingDispatch, and the reads the
//     benchmark and fault tools make, in inspect.go);
//   - leases (LeaseHolder), which tell a live run from a dead one at once,
//     and ReplaceDead, which replaces a dead run's job at once, where
//     River's rescuer would wait for RescueStuckJobsAfter.
//
// The workers live with the logic they run (package fanout, dispatch,
// replay, notify and maintenance); the River client is configured where
// the process is wired (package app).
package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// Queue names.
const (
	QueueFanout      = "fanout"
	QueueDispatch    = "dispatch"
	QueueReplay      = "replay"
	QueueMaintenance = river.QueueDefault
)

// FanoutArgs fans events out to the endpoints subscribed to their types.
type FanoutArgs struct {
	EventIDs []uuid.UUID `json:"event_ids"`
}

// Kind implements river.JobArgs.
func (FanoutArgs) Kind() string { return "fanout" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (FanoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueFanout, MaxAttempts: retryAttempts}
}

// DispatchArgs sends one endpoint's due deliveries. It is unique per
// endpoint while queued or running, so an endpoint with any backlog costs
// one job.
type DispatchArgs struct {
	EndpointID uuid.UUID `json:"endpoint_id"`
}

// Kind implements river.JobArgs.
func (DispatchArgs) Kind() string { return "dispatch" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DispatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueDispatch,
		MaxAttempts: retryAttempts, // a failing run is retried (Backoff); it never loses deliveries
		UniqueOpts: river.UniqueOpts{
			ByArgs:  true,
			ByState: LiveStates,
		},
	}
}

// ReplayArgs creates the replays of a bulk replay request staged by
// replay.Endpoint, a chunk at a time.
type ReplayArgs struct {
	RequestID  uuid.UUID `json:"request_id"`
	EndpointID uuid.UUID `json:"endpoint_id"`
}

// Kind implements river.JobArgs.
func (ReplayArgs) Kind() string { return "replay" }

// InsertOpts implements river.JobArgsWithInsertOpts. Its staged deliveries
// count as queued until it has run, so like a fan-out it must not run out
// of attempts while the database is down.
func (ReplayArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueReplay, MaxAttempts: retryAttempts}
}

// AlertArgs emails the tenant about one circuit transition.
type AlertArgs struct {
	AlertID uuid.UUID `json:"alert_id"`
}

// Kind implements river.JobArgs.
func (AlertArgs) Kind() string { return "circuit_alert" }

// InsertOpts implements river.JobArgsWithInsertOpts. A mail server that is
// down is retried with River's backoff for about a day.
func (AlertArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 20}
}

// MemberMailArgs emails a member the link that sets its password: an
// invitation, or a reset it asked for (notify.MemberMailWorker). The worker
// makes the link's token, so that the token exists only in the email.
type MemberMailArgs struct {
	MemberID uuid.UUID `json:"member_id"`
	Purpose  string    `json:"purpose"` // member.PurposeInvite or member.PurposeReset
}

// Kind implements river.JobArgs.
func (MemberMailArgs) Kind() string { return "member_mail" }

// InsertOpts implements river.JobArgsWithInsertOpts. A mail server that is
// down is retried with River's backoff, but not for longer than the link
// would work.
func (MemberMailArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 8}
}

// VerifyArgs challenges an endpoint whose verification is "challenge"
// (dispatch.VerifyWorker). Only the latest of an endpoint's is wanted: a
// new one replaces one that is waiting.
type VerifyArgs struct {
	EndpointID uuid.UUID `json:"endpoint_id"`
}

// Kind implements river.JobArgs.
func (VerifyArgs) Kind() string { return "endpoint_verify" }

// InsertOpts implements river.JobArgsWithInsertOpts: a receiver that does
// not answer is challenged a few times, with River's backoff (seconds to
// minutes), then waits for a challenge asked for by hand.
func (VerifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 4}
}

// RetentionArgs is the periodic job that keeps the week partitions: it
// creates them ahead and drops expired weeks (maintenance.RetentionWorker).
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "retention" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3}
}

// Backoff is the wait before retrying a fan-out or dispatch job whose run
// failed (attempt is the attempt that failed, from 1): 100ms doubling to
// 2s, 2s up to the 200th attempt (about seven minutes of failing), then
// 30s; each with up to a fifth of jitter. These jobs fail only when the
// database does, and a fan-out job must never run out of attempts while it
// is down (its events would never be delivered), so they have many
// attempts (MaxAttempts) spaced so that after an outage of minutes every
// endpoint is served again within seconds, instead of after River's
// default attempt⁴ seconds (81 s after the third failure).
func Backoff(attempt int) time.Duration {
	var d time.Duration
	switch {
	case attempt < 1:
		d = 100 * time.Millisecond
	case attempt <= 5:
		d = 100 * time.Millisecond << (attempt - 1)
	case attempt <= 200:
		d = 2 * time.Second
	default:
		d = 30 * time.Second
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// retryAttempts is MaxAttempts of fan-out, dispatch and replay jobs: with Backoff,
// about three and a half days of continuous failure.
const retryAttempts = 10_000

// Queue inserts Sluice's jobs with a River client. It inserts what the
// process's dispatch.Nudger tells it to: the Nudger is the one way a
// dispatch run is started or woken, and the one caller of the methods
// that queue dispatch jobs (Dispatch, DispatchLive, DispatchAt,
// DispatchNow, Unpark, ReplaceDead).
type Queue struct {
	client *river.Client[pgx.Tx]
}

// NewQueue returns a Queue on client.
func NewQueue(client *river.Client[pgx.Tx]) *Queue { return &Queue{client: client} }

// FanOut queues, in tx, the fan-out of events to their endpoints.
func (q *Queue) FanOut(ctx context.Context, tx pgx.Tx, eventIDs []uuid.UUID) error {
	if _, err := q.client.InsertTx(ctx, tx, FanoutArgs{EventIDs: eventIDs}, nil); err != nil {
		return fmt.Errorf("queue fan-out job: %w", err)
	}
	return nil
}

// Dispatch queues, in tx, a dispatch job for each endpoint. Endpoints that
// already have a dispatch job queued or running are skipped by River's
// uniqueness.
func (q *Queue) Dispatch(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) error {
	_, err := q.DispatchLive(ctx, tx, endpointIDs)
	return err
}

// DispatchLive is Dispatch, returning the endpoints whose job was already
// live (skipped as a duplicate).
func (q *Queue) DispatchLive(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) ([]uuid.UUID, error) {
	if len(endpointIDs) == 0 {
		return nil, nil
	}
	results, err := q.client.InsertManyTx(ctx, tx, dispatchParams(endpointIDs))
	if err != nil {
		return nil, fmt.Errorf("queue dispatch jobs: %w", err)
	}
	var live []uuid.UUID
	for _, r := range results {
		if !r.UniqueSkippedAsDuplicate {
			continue
		}
		var a DispatchArgs
		if err := json.Unmarshal(r.Job.EncodedArgs, &a); err != nil {
			return nil, fmt.Errorf("dispatch job args: %w", err)
		}
		live = append(live, a.EndpointID)
	}
	return live, nil
}

// Alert queues, in tx, the email of an operational event.
func (q *Queue) Alert(ctx context.Context, tx pgx.Tx, alertID uuid.UUID) error {
	if _, err := q.client.InsertTx(ctx, tx, AlertArgs{AlertID: alertID}, nil); err != nil {
		return fmt.Errorf("queue alert job: %w", err)
	}
	return nil
}

// MemberMail queues, in tx, the email that carries a member's link.
func (q *Queue) MemberMail(ctx context.Context, tx pgx.Tx, memberID uuid.UUID, purpose string) error {
	if _, err := q.client.InsertTx(ctx, tx, MemberMailArgs{MemberID: memberID, Purpose: purpose}, nil); err != nil {
		return fmt.Errorf("queue member mail job: %w", err)
	}
	return nil
}

// DispatchAt queues a dispatch job to run at (at once for a zero time) and
// returns its id: the successor of a run that parks its endpoint. The job is
// inserted available with a future scheduled_at, as River itself makes a
// short snooze, rather than scheduled: River's fetch takes it the moment it
// is due, where a scheduled job waits for River's scheduler (every 5 s, on
// the leader) to make it available, which would stretch a slow rate
// limit's gaps by up to 5 s. Unpark makes it due now.
func (q *Queue) DispatchAt(ctx context.Context, tx pgx.Tx, args DispatchArgs, at time.Time) (int64, error) {
	var opts *river.InsertOpts
	if !at.IsZero() {
		opts = &river.InsertOpts{ScheduledAt: at}
	}
	res, err := q.client.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return 0, fmt.Errorf("queue dispatch job: %w", err)
	}
	if res.Job.State == rivertype.JobStateScheduled {
		if _, err = tx.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE id = $1 AND state = 'scheduled'`, res.Job.ID); err != nil {
			return 0, fmt.Errorf("make dispatch job available: %w", err)
		}
	}
	return res.Job.ID, nil
}

// Unpark makes an endpoint's parked dispatch job (due when its throttle,
// circuit or next token allows) due now, or queues a dispatch if none is
// parked. A retried job is not announced to
// River's fetchers, which poll the dispatch queue only rarely, so the
// unparked one is announced as an alarm announces a park's end: by asking
// for the endpoint's dispatch job, which its live job makes River skip.
func (q *Queue) Unpark(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID, parkedJobID *int64) error {
	if parkedJobID != nil {
		job, err := q.client.JobGetTx(ctx, tx, *parkedJobID)
		parked := err == nil && (job.State == rivertype.JobStateScheduled ||
			job.State == rivertype.JobStateAvailable && job.ScheduledAt.After(time.Now()))
		if parked {
			if _, err = q.client.JobRetryTx(ctx, tx, *parkedJobID); err != nil {
				return fmt.Errorf("make parked dispatch job due: %w", err)
			}
			return q.Dispatch(ctx, tx, []uuid.UUID{endpointID})
		}
		if err != nil && !errors.Is(err, river.ErrNotFound) {
			return fmt.Errorf("get parked dispatch job: %w", err)
		}
	}
	return q.Dispatch(ctx, tx, []uuid.UUID{endpointID})
}

// Verify queues an endpoint's challenge (VerifyArgs).
func (q *Queue) Verify(ctx context.Context, tx pgx.Tx, endpointID uuid.UUID) error {
	if _, err := q.client.InsertTx(ctx, tx, VerifyArgs{EndpointID: endpointID}, nil); err != nil {
		return fmt.Errorf("queue verification job: %w", err)
	}
	return nil
}

// Replay queues, in tx, the job that replays a bulk replay request.
func (q *Queue) Replay(ctx context.Context, tx pgx.Tx, requestID, endpointID uuid.UUID) error {
	if _, err := q.client.InsertTx(ctx, tx, ReplayArgs{RequestID: requestID, EndpointID: endpointID}, nil); err != nil {
		return fmt.Errorf("queue replay job: %w", err)
	}
	return nil
}

// requeue inserts a new job of kind with the given JSON arguments: the
// replacement of a job whose run died (ReplaceDead).
func (q *Queue) requeue(ctx context.Context, tx pgx.Tx, kind string, args []byte) error {
	var err error
	switch kind {
	case FanoutArgs{}.Kind():
		var a FanoutArgs
		if err = json.Unmarshal(args, &a); err == nil {
			err = q.FanOut(ctx, tx, a.EventIDs)
		}
	case DispatchArgs{}.Kind():
		var a DispatchArgs
		if err = json.Unmarshal(args, &a); err == nil {
			err = q.Dispatch(ctx, tx, []uuid.UUID{a.EndpointID})
		}
	case ReplayArgs{}.Kind():
		var a ReplayArgs
		if err = json.Unmarshal(args, &a); err == nil {
			err = q.Replay(ctx, tx, a.RequestID, a.EndpointID)
		}
	default:
		err = errors.New("no replacement for this kind")
	}
	if err != nil {
		return fmt.Errorf("requeue %s job: %w", kind, err)
	}
	return nil
}

// Complete marks a running job completed in tx, so that it completes
// exactly when the work it did in tx commits (River then leaves it alone
// when Work returns). Every worker that completes itself calls this.
func Complete[T river.JobArgs](ctx context.Context, tx pgx.Tx, job *river.Job[T]) error {
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("complete %s job: %w", job.Kind, err)
	}
	return nil
}

// DispatchNow is Dispatch outside any transaction.
func (q *Queue) DispatchNow(ctx context.Context, endpointIDs []uuid.UUID) error {
	if len(endpointIDs) == 0 {
		return nil
	}
	if _, err := q.client.InsertMany(ctx, dispatchParams(endpointIDs)); err != nil {
		return fmt.Errorf("queue dispatch jobs: %w", err)
	}
	return nil
}

// dispatchParams builds the inserts in endpoint id order. River's unique
// insert locks an existing job row (ON CONFLICT DO UPDATE); taking those
// locks in one global order keeps concurrent fan-outs from deadlocking.
func dispatchParams(endpointIDs []uuid.UUID) []river.InsertManyParams {
	ids := slices.Clone(endpointIDs)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: DispatchArgs{EndpointID: id}}
	}
	return params
}
