package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/flow"
	"github.com/sluice-dev/sluice/internal/signature"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// CreateEndpoint stores a new endpoint with a fresh signing secret, returned
// in plaintext beside it.
func (s *Store) CreateEndpoint(ctx context.Context, tenantID uuid.UUID, set sluice.EndpointSettings) (sluice.Endpoint, string, error) {
	headers, err := json.Marshal(set.Headers)
	if err != nil {
		return sluice.Endpoint{}, "", fmt.Errorf("encode json: %w", err)
	}
	secret := signature.NewSecret()
	perSecond, perMinute, burst := rateLimitColumns(set.RateLimit)
	adaptive, floor := adaptiveColumns(set.RateLimit)
	backlogQueued, backlogOldest := backlogAlertColumns(set.BacklogAlert)
	var row dbq.Endpoint
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		row, err = q.CreateEndpoint(ctx, dbq.CreateEndpointParams{
			ID:                        newID(),
			TenantID:                  tenantID,
			Url:                       set.URL,
			Description:               set.Description,
			RateLimitPerSecond:        perSecond,
			RateLimitPerMinute:        perMinute,
			RateLimitBurst:            burst,
			RateLimitAdaptive:         adaptive,
			RateLimitMin:              floor,
			MaxInFlight:               int32(set.MaxInFlight),
			Headers:                   headers,
			Disabled:                  set.Disabled,
			BacklogAlertQueued:        backlogQueued,
			BacklogAlertOldestSeconds: backlogOldest,
			SecretEnc:                 s.box.Seal([]byte(secret)),
			Consumer:                  set.Consumer,
			Ordering:                  orderingOf(set),
		})
		if errors.Is(notFound(err), sluice.ErrNotFound) { // the consumer's foreign key
			v := &sluice.ValidationError{}
			v.Add("consumer", "names no consumer of this tenant")
			return v
		}
		if err != nil {
			return fmt.Errorf("create endpoint: %w", err)
		}
		if set.Delivery == sluice.DeliveryPoll {
			if row, err = q.MakeEndpointPoll(ctx, row.ID); err != nil {
				return fmt.Errorf("make poll endpoint: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return sluice.Endpoint{}, "", err
	}
	ep, err := endpointFromRow(endpointView{Endpoint: row})
	return ep, secret, err
}

// GetEndpoint returns one of a tenant's endpoints.
func (s *Store) GetEndpoint(ctx context.Context, tenantID, id uuid.UUID) (sluice.Endpoint, error) {
	row, err := s.q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Endpoint{}, notFound(err)
	}
	return endpointFromRow(endpointView(row))
}

// ListEndpoints returns a page of a tenant's endpoints, newest first: those
// of one consumer when consumer is not nil.
func (s *Store) ListEndpoints(ctx context.Context, tenantID uuid.UUID, consumer *string, p sluice.PageParams) (sluice.Page[sluice.Endpoint], error) {
	rows, err := s.q.ListEndpoints(ctx, dbq.ListEndpointsParams{TenantID: tenantID, Consumer: consumer, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.Endpoint]{}, fmt.Errorf("list endpoints: %w", err)
	}
	return page(rows, p, func(r dbq.ListEndpointsRow) uuid.UUID { return r.Endpoint.ID },
		func(r dbq.ListEndpointsRow) (sluice.Endpoint, error) { return endpointFromRow(endpointView(r)) })
}

// UpdateEndpoint replaces the tenant-chosen fields of an endpoint and
// unparks its parked dispatch, if it has one, in the same transaction: a run parked
// until its next token (or a throttle or probe) looks again at once, so a
// new rate limit applies within a second on every worker.
func (s *Store) UpdateEndpoint(ctx context.Context, tenantID, id uuid.UUID, set sluice.EndpointSettings, jobs JobQueue) (sluice.Endpoint, error) {
	headers, err := json.Marshal(set.Headers)
	if err != nil {
		return sluice.Endpoint{}, fmt.Errorf("encode json: %w", err)
	}
	perSecond, perMinute, burst := rateLimitColumns(set.RateLimit)
	adaptive, floor := adaptiveColumns(set.RateLimit)
	backlogQueued, backlogOldest := backlogAlertColumns(set.BacklogAlert)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.WithTx(tx).UpdateEndpoint(ctx, dbq.UpdateEndpointParams{
			TenantID:                  tenantID,
			ID:                        id,
			Url:                       set.URL,
			Description:               set.Description,
			RateLimitPerSecond:        perSecond,
			RateLimitPerMinute:        perMinute,
			RateLimitBurst:            burst,
			RateLimitAdaptive:         adaptive,
			RateLimitMin:              floor,
			MaxInFlight:               int32(set.MaxInFlight),
			Headers:                   headers,
			Disabled:                  set.Disabled,
			BacklogAlertQueued:        backlogQueued,
			BacklogAlertOldestSeconds: backlogOldest,
		})
		if err != nil {
			return notFound(err)
		}
		if err := setOrdering(ctx, s.q.WithTx(tx), tenantID, id, orderingOf(set)); err != nil {
			return err
		}
		var evs []sluice.OpEvent
		ep := sluice.OpEndpoint{ID: id, URL: row.NewUrl, Consumer: row.Consumer}
		switch {
		case set.Disabled && !row.WasDisabled:
			evs = append(evs, ep.Event(sluice.OpEndpointDisabled, sluice.DisabledManual))
		case !set.Disabled && row.WasDisabled:
			evs = append(evs, ep.Event(sluice.OpEndpointEnabled, sluice.ReasonManual))
		}
		if err := InsertOpEvents(ctx, Tx{Tx: tx, Q: s.q.WithTx(tx)}, jobs, tenantID, evs); err != nil {
			return err
		}
		// A run that found the endpoint disabled ended without a
		// successor: enabling it queues one, to drain what stayed queued.
		if row.ParkedJobID == nil && !(row.WasDisabled && !set.Disabled) {
			return nil
		}
		return jobs.Unpark(ctx, tx, id, row.ParkedJobID)
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return s.GetEndpoint(ctx, tenantID, id)
}

// DeleteEndpoint removes an endpoint with its subscriptions.
func (s *Store) DeleteEndpoint(ctx context.Context, tenantID, id uuid.UUID) error {
	n, err := s.q.DeleteEndpoint(ctx, dbq.DeleteEndpointParams{TenantID: tenantID, ID: id})
	if err == nil && n == 0 {
		err = sluice.ErrNotFound
	}
	return err
}

// EndpointSecret returns an endpoint's current signing secret.
func (s *Store) EndpointSecret(ctx context.Context, tenantID, id uuid.UUID) (string, error) {
	row, err := s.q.GetEndpointSecrets(ctx, dbq.GetEndpointSecretsParams{TenantID: tenantID, ID: id})
	if err != nil {
		return "", notFound(err)
	}
	secret, err := s.box.Open(row.SecretEnc)
	return string(secret), err
}

// RotateEndpointSecret gives an endpoint a new signing secret; the current
// one keeps signing beside it for grace.
func (s *Store) RotateEndpointSecret(ctx context.Context, tenantID, id uuid.UUID, grace time.Duration) (string, error) {
	secret := signature.NewSecret()
	n, err := s.q.RotateEndpointSecret(ctx, dbq.RotateEndpointSecretParams{
		TenantID:          tenantID,
		ID:                id,
		SecretEnc:         s.box.Seal([]byte(secret)),
		PreviousExpiresAt: new(time.Now().Add(grace)),
	})
	if err == nil && n == 0 {
		err = sluice.ErrNotFound
	}
	return secret, err
}

func rateLimitColumns(rl *sluice.RateLimit) (perSecond, perMinute, burst *int32) {
	if rl == nil {
		return nil, nil, nil
	}
	return optInt32(rl.PerSecond), optInt32(rl.PerMinute), optInt32(rl.Burst)
}

// optInt32 is the column of an optional setting: nil for zero, unset.
func optInt32(v int) *int32 {
	if v == 0 {
		return nil
	}
	return new(int32(v))
}

// adaptiveColumns are the columns of rl's Smart delivery settings.
func adaptiveColumns(rl *sluice.RateLimit) (adaptive bool, floor *float64) {
	if rl == nil || !rl.Adaptive {
		return false, nil
	}
	if rl.Min > 0 {
		floor = new(rl.Min)
	}
	return true, floor
}

// backlogAlertColumns are the columns of a backlog alert: nil where unset.
func backlogAlertColumns(a *sluice.BacklogAlert) (queued, oldestSeconds *int32) {
	if a == nil {
		return nil, nil
	}
	return optInt32(a.Queued), optInt32(a.OldestSeconds)
}

// backlogAlertOf is the backlog alert set on endpoint row e, if any.
func backlogAlertOf(e dbq.Endpoint) *sluice.BacklogAlert {
	if e.BacklogAlertQueued == nil && e.BacklogAlertOldestSeconds == nil {
		return nil
	}
	a := &sluice.BacklogAlert{}
	if e.BacklogAlertQueued != nil {
		a.Queued = int(*e.BacklogAlertQueued)
	}
	if e.BacklogAlertOldestSeconds != nil {
		a.OldestSeconds = int(*e.BacklogAlertOldestSeconds)
	}
	return a
}

// rateLimitOf is the rate limit on endpoint row e, with its Smart delivery
// settings.
func rateLimitOf(e dbq.Endpoint) *sluice.RateLimit {
	rl := rateLimitFromColumns(e.RateLimitPerSecond, e.RateLimitPerMinute, e.RateLimitBurst)
	if rl != nil && e.RateLimitAdaptive {
		rl.Adaptive = true
		if e.RateLimitMin != nil {
			rl.Min = *e.RateLimitMin
		}
	}
	return rl
}

func rateLimitFromColumns(perSecond, perMinute, burst *int32) *sluice.RateLimit {
	if perSecond == nil && perMinute == nil {
		return nil
	}
	rl := &sluice.RateLimit{}
	if perSecond != nil {
		rl.PerSecond = int(*perSecond)
	}
	if perMinute != nil {
		rl.PerMinute = int(*perMinute)
	}
	if burst != nil {
		rl.Burst = int(*burst)
	}
	return rl
}

// endpointView is an endpoint row with the state reads show beside it.
type endpointView struct {
	Endpoint         dbq.Endpoint
	ThrottledUntil   *time.Time
	ThrottleReason   *string
	QueuedDeliveries int64
}

func endpointFromRow(v endpointView) (sluice.Endpoint, error) {
	r := v.Endpoint
	ep := sluice.Endpoint{
		ID:             r.ID,
		TenantID:       r.TenantID,
		URL:            r.Url,
		Delivery:       r.Delivery,
		Description:    r.Description,
		RateLimit:      rateLimitOf(r),
		MaxInFlight:    int(r.MaxInFlight),
		Disabled:       r.Disabled,
		DisabledReason: r.DisabledReason,
		BacklogAlert:   backlogAlertOf(r),
		Consumer:       r.Consumer,
		Ordering:       r.Ordering,
		Circuit: sluice.Circuit{
			State: r.CircuitState, ConsecutiveFailures: int(r.ConsecutiveFailures),
			OpenedAt: r.CircuitOpenedAt, NextProbeAt: r.CircuitNextProbeAt,
		},
		QueuedDeliveries: v.QueuedDeliveries,
		CreatedAt:        r.CreatedAt,
		UpdatedAt:        r.UpdatedAt,
	}
	if rl := ep.RateLimit; rl != nil && rl.Adaptive {
		ep.EffectiveRate = new(EndpointAdaptive(r).Current(flow.LimitOf(*rl), time.Now()))
	}
	if v.ThrottledUntil != nil && time.Now().Before(*v.ThrottledUntil) {
		ep.ThrottledUntil, ep.ThrottleReason = v.ThrottledUntil, v.ThrottleReason
	}
	switch {
	case r.Disabled:
		ep.Status = sluice.EndpointDisabled
	case r.CircuitState == sluice.CircuitOpen || r.CircuitState == sluice.CircuitHalfOpen:
		ep.Status = sluice.EndpointCircuitOpen
	case ep.ThrottledUntil != nil:
		ep.Status = sluice.EndpointThrottled
	default:
		ep.Status = sluice.EndpointActive
	}
	if err := json.Unmarshal(r.Headers, &ep.Headers); err != nil {
		return ep, fmt.Errorf("decode json: %w", err)
	}
	if ep.Headers == nil {
		ep.Headers = map[string]string{}
	}
	return ep, nil
}

// orderingOf is the ordering set asks for, OrderingNone when it names none.
func orderingOf(set sluice.EndpointSettings) string {
	if set.Ordering == "" {
		return sluice.OrderingNone
	}
	return set.Ordering
}

// setOrdering changes an endpoint's ordering, if it changes, in q's
// transaction. Becoming FIFO puts the deliveries it has queued in their
// lines (BackfillFIFO), with its row locked FOR UPDATE first
// (LockEndpointOrdering), so that no delivery made meanwhile is left out
// of its line. Leaving FIFO leaves their places, which claims then ignore.
func setOrdering(ctx context.Context, q *dbq.Queries, tenantID, id uuid.UUID, ordering string) error {
	was, err := q.EndpointOrdering(ctx, dbq.EndpointOrderingParams{TenantID: tenantID, ID: id})
	if err != nil {
		return fmt.Errorf("read ordering: %w", notFound(err))
	}
	if was == ordering {
		return nil
	}
	if err := q.LockEndpointOrdering(ctx, dbq.LockEndpointOrderingParams{TenantID: tenantID, ID: id}); err != nil {
		return fmt.Errorf("lock endpoint: %w", err)
	}
	if err := q.SetEndpointOrdering(ctx, dbq.SetEndpointOrderingParams{TenantID: tenantID, ID: id, Ordering: ordering}); err != nil {
		return fmt.Errorf("set ordering: %w", err)
	}
	if ordering != sluice.OrderingFIFO {
		return nil
	}
	if err := q.BackfillFIFO(ctx, id); err != nil {
		return fmt.Errorf("put queued deliveries in line: %w", err)
	}
	return nil
}
