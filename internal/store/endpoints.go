package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// CreateEndpoint stores a new endpoint signing with secret, which it
// seals. A consumer that is not the tenant's is sluice.ErrNotFound.
func (s *Store) CreateEndpoint(ctx context.Context, tenantID uuid.UUID, set sluice.EndpointSettings, secret string) (sluice.Endpoint, error) {
	p, err := s.settingsParams(ctx, tenantID, NewID(), set)
	if err != nil {
		return sluice.Endpoint{}, err
	}
	var row dbq.Endpoint
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		row, err = q.CreateEndpoint(ctx, dbq.CreateEndpointParams{
			ID:                        p.ID,
			TenantID:                  p.TenantID,
			Url:                       p.Url,
			Description:               p.Description,
			RateLimitPerSecond:        p.RateLimitPerSecond,
			RateLimitPerMinute:        p.RateLimitPerMinute,
			RateLimitBurst:            p.RateLimitBurst,
			RateLimitAdaptive:         p.RateLimitAdaptive,
			RateLimitMin:              p.RateLimitMin,
			MaxInFlight:               p.MaxInFlight,
			Headers:                   p.Headers,
			Disabled:                  p.Disabled,
			BacklogAlertQueued:        p.BacklogAlertQueued,
			BacklogAlertOldestSeconds: p.BacklogAlertOldestSeconds,
			SecretEnc:                 s.box.Seal([]byte(secret)),
			Consumer:                  set.Consumer,
			Ordering:                  orderingOf(set),
			Options:                   p.Options,
		})
		if err != nil {
			return fmt.Errorf("create endpoint: %w", NotFound(err)) // the consumer's foreign key
		}
		if set.Delivery == sluice.DeliveryPoll {
			if row, err = q.MakeEndpointPoll(ctx, row.ID); err != nil {
				return fmt.Errorf("make poll endpoint: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return sluice.Endpoint{}, err
	}
	return s.endpointFromRow(ctx, endpointView{Endpoint: row})
}

// GetEndpoint returns one of a tenant's endpoints.
func (s *Store) GetEndpoint(ctx context.Context, tenantID, id uuid.UUID) (sluice.Endpoint, error) {
	row, err := s.q.GetEndpoint(ctx, dbq.GetEndpointParams{TenantID: tenantID, ID: id})
	if err != nil {
		return sluice.Endpoint{}, NotFound(err)
	}
	return s.endpointFromRow(ctx, endpointView(row))
}

// ListEndpoints returns a page of a tenant's endpoints, newest first: those
// of one consumer when consumer is not nil.
func (s *Store) ListEndpoints(ctx context.Context, tenantID uuid.UUID, consumer *string, p sluice.PageParams) (sluice.Page[sluice.Endpoint], error) {
	rows, err := s.q.ListEndpoints(ctx, dbq.ListEndpointsParams{TenantID: tenantID, Consumer: consumer, After: p.After, MaxRows: limitRows(p)})
	if err != nil {
		return sluice.Page[sluice.Endpoint]{}, fmt.Errorf("list endpoints: %w", err)
	}
	return Page(rows, p, func(r dbq.ListEndpointsRow) uuid.UUID { return r.Endpoint.ID },
		func(r dbq.ListEndpointsRow) (sluice.Endpoint, error) { return s.endpointFromRow(ctx, endpointView(r)) })
}

// EndpointUpdate is what an endpoint was when UpdateEndpoint changed it.
type EndpointUpdate struct {
	// WasDisabled is whether it was disabled before.
	WasDisabled bool
	// ParkedJobID is its parked dispatch job, if it has one.
	ParkedJobID *int64
}

// UpdateEndpoint replaces the tenant-chosen fields of an endpoint but its
// ordering (SetEndpointOrdering), with the row locked, and reports what
// the endpoint was. With reverify, it is unverified again.
func (s *Store) UpdateEndpoint(ctx context.Context, tenantID, id uuid.UUID, set sluice.EndpointSettings, reverify bool) (EndpointUpdate, error) {
	p, err := s.settingsParams(ctx, tenantID, id, set)
	if err != nil {
		return EndpointUpdate{}, err
	}
	p.Reverify = reverify
	row, err := s.q.UpdateEndpoint(ctx, p)
	if err != nil {
		return EndpointUpdate{}, fmt.Errorf("update endpoint: %w", NotFound(err))
	}
	return EndpointUpdate{WasDisabled: row.WasDisabled, ParkedJobID: row.ParkedJobID}, nil
}

// EndpointSecret returns an endpoint's current signing secret.
func (s *Store) EndpointSecret(ctx context.Context, tenantID, id uuid.UUID) (string, error) {
	row, err := s.q.GetEndpointSecrets(ctx, dbq.GetEndpointSecretsParams{TenantID: tenantID, ID: id})
	if err != nil {
		return "", fmt.Errorf("read endpoint secret: %w", NotFound(err))
	}
	secret, err := s.box.Open(row.SecretEnc)
	if err != nil {
		return "", fmt.Errorf("open endpoint secret: %w", err)
	}
	return string(secret), nil
}

// RotateEndpointSecret makes secret, which it seals, an endpoint's signing
// secret; the current one keeps signing beside it until previousExpires.
func (s *Store) RotateEndpointSecret(ctx context.Context, tenantID, id uuid.UUID, secret string, previousExpires time.Time) error {
	err := ExecRows(ctx, s, (*dbq.Queries).RotateEndpointSecret, dbq.RotateEndpointSecretParams{
		TenantID:          tenantID,
		ID:                id,
		SecretEnc:         s.box.Seal([]byte(secret)),
		PreviousExpiresAt: &previousExpires,
	})
	if err != nil {
		return fmt.Errorf("rotate endpoint secret: %w", err)
	}
	return nil
}

// settingsParams are the columns of endpoint id's tenant-chosen settings
// set, as UpdateEndpoint writes them and CreateEndpoint inserts them.
func (s *Store) settingsParams(ctx context.Context, tenantID, id uuid.UUID, set sluice.EndpointSettings) (dbq.UpdateEndpointParams, error) {
	headers, err := json.Marshal(set.Headers)
	if err != nil {
		return dbq.UpdateEndpointParams{}, fmt.Errorf("encode json: %w", err)
	}
	if headers, err = s.payloads.Stored(ctx, tenantID, headers); err != nil {
		return dbq.UpdateEndpointParams{}, fmt.Errorf("seal headers: %w", err)
	}
	p := dbq.UpdateEndpointParams{
		TenantID:    tenantID,
		ID:          id,
		Url:         set.URL,
		Description: set.Description,
		MaxInFlight: int32(set.MaxInFlight),
		Headers:     headers,
		Disabled:    set.Disabled,
	}
	if rl := set.RateLimit; rl != nil {
		p.RateLimitPerSecond = optInt32(rl.PerSecond)
		p.RateLimitPerMinute = optInt32(rl.PerMinute)
		p.RateLimitBurst = optInt32(rl.Burst)
		// Smart delivery, with its floor when it has one
		p.RateLimitAdaptive = rl.Adaptive
		if rl.Adaptive && rl.Min > 0 {
			p.RateLimitMin = new(rl.Min)
		}
	}
	if a := set.BacklogAlert; a != nil {
		p.BacklogAlertQueued = optInt32(a.Queued)
		p.BacklogAlertOldestSeconds = optInt32(a.OldestSeconds)
	}
	if !set.Options.IsZero() { // null while every option is the default
		if p.Options, err = json.Marshal(set.Options); err != nil {
			return p, fmt.Errorf("encode delivery options: %w", err)
		}
	}
	return p, nil
}

// optInt32 is the column of an optional setting: nil for zero, unset.
func optInt32(v int) *int32 {
	if v == 0 {
		return nil
	}
	return new(int32(v))
}

// BacklogAlertOf maps an endpoint row's backlog alert columns; nil when
// it has none.
func BacklogAlertOf(queued, oldestSeconds *int32) *sluice.BacklogAlert {
	if queued == nil && oldestSeconds == nil {
		return nil
	}
	return &sluice.BacklogAlert{Queued: int(deref(queued)), OldestSeconds: int(deref(oldestSeconds))}
}

// EndpointRateLimit is the rate limit on endpoint row e, with its Smart
// delivery settings; nil when it has none.
func EndpointRateLimit(e dbq.Endpoint) *sluice.RateLimit {
	if e.RateLimitPerSecond == nil && e.RateLimitPerMinute == nil {
		return nil
	}
	rl := &sluice.RateLimit{
		PerSecond: int(deref(e.RateLimitPerSecond)),
		PerMinute: int(deref(e.RateLimitPerMinute)),
		Burst:     int(deref(e.RateLimitBurst)),
		Adaptive:  e.RateLimitAdaptive,
	}
	if e.RateLimitAdaptive {
		rl.Min = deref(e.RateLimitMin)
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

func (s *Store) endpointFromRow(ctx context.Context, v endpointView) (sluice.Endpoint, error) {
	r := v.Endpoint
	ep := sluice.Endpoint{
		ID:             r.ID,
		TenantID:       r.TenantID,
		URL:            r.Url,
		Delivery:       r.Delivery,
		Description:    r.Description,
		RateLimit:      EndpointRateLimit(r),
		MaxInFlight:    int(r.MaxInFlight),
		Disabled:       r.Disabled,
		DisabledReason: r.DisabledReason,
		BacklogAlert:   BacklogAlertOf(r.BacklogAlertQueued, r.BacklogAlertOldestSeconds),
		Consumer:       r.Consumer,
		Ordering:       r.Ordering,
		Circuit: sluice.Circuit{
			State: r.CircuitState, ConsecutiveFailures: int(r.ConsecutiveFailures),
			OpenedAt: r.CircuitOpenedAt, NextProbeAt: r.CircuitNextProbeAt,
		},
		QueuedDeliveries: v.QueuedDeliveries,
		VerifiedAt:       r.VerifiedAt, VerificationError: r.VerificationError,
		CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt,
	}
	if r.AdaptiveRate != nil && r.AdaptiveRateAt != nil {
		ep.Slowdown.Rate, ep.Slowdown.At = *r.AdaptiveRate, *r.AdaptiveRateAt
	}
	if r.AdaptiveHalvedAt != nil {
		ep.Slowdown.HalvedAt = *r.AdaptiveHalvedAt
	}
	ep.ThrottledUntil, ep.ThrottleReason = v.ThrottledUntil, v.ThrottleReason
	headers, err := s.payloads.OpenJSON(ctx, r.TenantID, r.Headers)
	if err != nil {
		return ep, fmt.Errorf("open headers: %w", err)
	}
	if err := json.Unmarshal(headers, &ep.Headers); err != nil {
		return ep, fmt.Errorf("decode json: %w", err)
	}
	if ep.Headers == nil {
		ep.Headers = map[string]string{}
	}
	if r.Options != nil {
		if err := json.Unmarshal(r.Options, &ep.DeliveryOptions); err != nil {
			return ep, fmt.Errorf("decode delivery options: %w", err)
		}
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
