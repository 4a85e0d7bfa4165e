package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DispatchOrWake makes sure each endpoint has a dispatch job queued or
// running, after the deliveries that need it have committed: it looks up
// which of them have a live job, queues one for each of the others, and
// names the endpoints with a live job on DispatchWakeChannel, in case
// their run lingers in another process.
//
// No delivery is stranded by a dispatch job finishing meanwhile: a job
// finishes only in a transaction that locks its endpoint row FOR UPDATE,
// which conflicts with the KEY SHARE lock each delivery insert took. So
// either the job's final check ran after the deliveries committed and saw
// them (the job is live or done, and either way they are sent), or the
// deliveries waited for the job's completion to commit, and the lookup
// then finds no live job and queues one. The lookup answers as River's
// unique insert would, on the same states (jobs.DispatchArgs), from the
// index of live dispatch jobs; River's uniqueness still settles a race
// between two inserts. A crash between the two commits is covered by the
// sweeper; the inserts commit asynchronously for the same reason.
//
// The new jobs are inserted in one transaction, so River announces them
// to its fetchers with one notification at its commit. Inserted one
// transaction each, the second of two jobs inserted within River's
// notification cooldown (FetchCooldown) was announced by no one and waited
// for the dispatch queue's poll. River's unique insert locks a live job's
// row, in endpoint order (jobs.Queue.DispatchLive); with the live ones
// looked up first, that happens only when a job became live in between.
func (s *Store) DispatchOrWake(ctx context.Context, endpointIDs []uuid.UUID, jobs JobQueue) error {
	if len(endpointIDs) == 0 {
		return nil
	}
	live, err := s.liveDispatch(ctx, endpointIDs)
	if err != nil {
		return fmt.Errorf("look up live dispatch jobs: %w", err)
	}
	var wake, queue []uuid.UUID
	for _, id := range endpointIDs {
		if live[id] {
			wake = append(wake, id)
		} else {
			queue = append(queue, id)
		}
	}
	if len(queue) > 0 {
		err := s.inAsyncTx(ctx, func(tx pgx.Tx) error {
			l, err := jobs.DispatchLive(ctx, tx, queue)
			wake = append(wake, l...)
			return err
		})
		if err != nil {
			return err
		}
	}
	return s.NotifyDispatchWake(ctx, wake)
}

// liveDispatchSQL finds which endpoints have a live dispatch job, from the
// index of live dispatch jobs (00015_live_dispatch_jobs_index.sql, whose
// predicate this repeats).
const liveDispatchSQL = `
SELECT DISTINCT (j.args ->> 'endpoint_id')::uuid FROM river_job j
WHERE j.kind = 'dispatch'
  AND j.state IN ('available', 'pending', 'running', 'scheduled', 'retryable')
  AND j.args ->> 'endpoint_id' = ANY($1::text[])`

func (s *Store) liveDispatch(ctx context.Context, endpointIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	keys := make([]string, len(endpointIDs))
	for i, id := range endpointIDs {
		keys[i] = id.String()
	}
	rows, err := s.pool.Query(ctx, liveDispatchSQL, keys)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, err
	}
	live := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

// DispatchWakeChannel is the Postgres notification channel that names, as
// comma-separated ids, endpoints whose dispatch run should look for new
// deliveries now (dispatch.Waker.Listen listens to it).
const DispatchWakeChannel = "sluice_dispatch_wake"

// wakePayloadIDs keeps a notification's payload under Postgres's
// 8,000-byte limit.
const wakePayloadIDs = 200

// NotifyDispatchWake names endpoints on DispatchWakeChannel, in as few
// notifications as fit.
func (s *Store) NotifyDispatchWake(ctx context.Context, endpointIDs []uuid.UUID) error {
	for len(endpointIDs) > 0 {
		n := min(len(endpointIDs), wakePayloadIDs)
		ids := make([]string, n)
		for i, id := range endpointIDs[:n] {
			ids[i] = id.String()
		}
		if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", DispatchWakeChannel, strings.Join(ids, ",")); err != nil {
			return fmt.Errorf("notify dispatchers: %w", err)
		}
		endpointIDs = endpointIDs[n:]
	}
	return nil
}
