package store

import (
	"context"
	"errors"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/signature"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Target is what a dispatcher needs to send to one endpoint: where, how
// signed, and how fast.
type Target struct {
	ID          uuid.UUID
	URL         string
	Headers     map[string]string
	Keys        [][]byte // signing keys: the current secret's, then a rotated-out one still in its grace period
	MaxInFlight int
	RateLimit   *sluice.RateLimit
	Disabled    bool
}

// Claimed is a due delivery handed to a dispatcher, with its event.
type Claimed struct {
	ID             uuid.UUID
	EventID        uuid.UUID
	FailureCount   int
	EventType      string
	Payload        []byte
	EventCreatedAt time.Time
}

// Outcome is what one attempt did to its delivery.
type Outcome struct {
	DeliveryID    uuid.UUID
	EventID       uuid.UUID // the event that was sent
	Status        string
	Failed        bool // the attempt spends retry budget
	NextAttemptAt time.Time
	Attempt       sluice.Attempt
}

// Claim locks an endpoint, asks limit how many deliveries may go now, and
// claims up to that many due ones, oldest due first.
func (s *Store) Claim(ctx context.Context, endpointID uuid.UUID, limit func(Target) int) (Target, []Claimed, error) {
	var (
		target  Target
		claimed []Claimed
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.LockEndpointForDispatch(ctx, endpointID)
		if err != nil {
			return notFound(err)
		}
		if target, err = s.target(row); err != nil {
			return err
		}
		n := limit(target)
		if n <= 0 {
			return nil
		}
		rows, err := q.ClaimDueDeliveries(ctx, dbq.ClaimDueDeliveriesParams{EndpointID: endpointID, MaxRows: int32(n)})
		if err != nil {
			return err
		}
		claimed = make([]Claimed, len(rows))
		for i, r := range rows {
			claimed[i] = Claimed{
				ID: r.ID, EventID: r.EventID, FailureCount: int(r.FailureCount),
				EventType: r.Type, Payload: r.Payload, EventCreatedAt: r.EventCreatedAt,
			}
		}
		return nil
	})
	return target, claimed, err
}

func (s *Store) target(r dbq.Endpoint) (Target, error) {
	t := Target{
		ID:          r.ID,
		URL:         r.Url,
		MaxInFlight: int(r.MaxInFlight),
		RateLimit:   rateLimitFromColumns(r.RateLimitPerSecond, r.RateLimitPerMinute, r.RateLimitBurst),
		Disabled:    r.Disabled,
	}
	if err := json.Unmarshal(r.Headers, &t.Headers); err != nil {
		return t, err
	}
	secrets := [][]byte{r.SecretEnc}
	if r.PreviousSecretEnc != nil && r.PreviousSecretExpiresAt != nil && time.Now().Before(*r.PreviousSecretExpiresAt) {
		secrets = append(secrets, r.PreviousSecretEnc)
	}
	for _, sealed := range secrets {
		secret, err := s.box.Open(sealed)
		if err != nil {
			return t, err
		}
		key, err := signature.Key(string(secret))
		if err != nil {
			return t, err
		}
		t.Keys = append(t.Keys, key)
	}
	return t, nil
}

// RecordOutcomes stores a batch of attempts and their effect on their
// deliveries in one transaction.
func (s *Store) RecordOutcomes(ctx context.Context, outcomes []Outcome) error {
	n := len(outcomes)
	rec := dbq.RecordOutcomesParams{
		Ids: make([]uuid.UUID, n), EventIds: make([]uuid.UUID, n), Statuses: make([]string, n),
		Failed: make([]int32, n), NextAttemptAts: make([]time.Time, n),
	}
	att := dbq.InsertAttemptsParams{
		DeliveryIds: make([]uuid.UUID, n), Ats: make([]time.Time, n), StatusCodes: make([]int32, n),
		Errors: make([]string, n), LatenciesMs: make([]int32, n), Bodies: make([]string, n),
	}
	for i, o := range outcomes {
		rec.Ids[i], rec.EventIds[i], rec.Statuses[i], rec.NextAttemptAts[i] = o.DeliveryID, o.EventID, o.Status, o.NextAttemptAt
		if o.Failed {
			rec.Failed[i] = 1
		}
		a := o.Attempt
		att.DeliveryIds[i], att.Ats[i], att.LatenciesMs[i] = o.DeliveryID, a.At, int32(a.LatencyMS)
		if a.StatusCode != nil {
			att.StatusCodes[i] = int32(*a.StatusCode)
		}
		if a.Error != nil {
			att.Errors[i] = *a.Error
		}
		if a.ResponseBody != nil {
			att.Bodies[i] = *a.ResponseBody
		}
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.InsertAttempts(ctx, att); err != nil {
			return err
		}
		return q.RecordOutcomes(ctx, rec)
	})
}

// FinishDispatch ends an endpoint's dispatch when nothing is due: with the
// endpoint row locked against fan-out it checks once more for due
// deliveries, and only if there are none runs done (the job completing
// itself) and commits. It reports whether the dispatch finished.
func (s *Store) FinishDispatch(ctx context.Context, endpointID uuid.UUID, done TxHook) (bool, error) {
	finished := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.LockEndpointToFinish(ctx, endpointID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		due, err := q.HasDueDeliveries(ctx, endpointID)
		if err != nil || due {
			return err
		}
		finished = true
		return done(ctx, tx)
	})
	return finished, err
}

// NextDueAt is when the endpoint's earliest queued delivery is due, nil when
// its queue is empty.
func (s *Store) NextDueAt(ctx context.Context, endpointID uuid.UUID) (*time.Time, error) {
	t, err := s.q.NextDueAt(ctx, endpointID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

// EndpointsWithDueDeliveries lists enabled endpoints with deliveries due now.
func (s *Store) EndpointsWithDueDeliveries(ctx context.Context) ([]uuid.UUID, error) {
	return s.q.EndpointsWithDueDeliveries(ctx)
}
