package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Consumers: a tenant's customers, each with endpoints of its own and a
// portal it signs in to with a link. They are the tenant's own objects: a
// portal caller sees none of them (sluice.ErrNotFound).

// ConsumerInput is the whole of a consumer's settings, as a create or an
// update gives them.
type ConsumerInput struct {
	Name string
	// AlertEmail is where the consumer's alerts go; nil for none (the
	// tenant's address).
	AlertEmail *string
}

// putMode is what a put of a consumer may do.
type putMode int

const (
	createOrUpdate putMode = iota
	createOnly             // an existing one is sluice.ErrConflict
	updateOnly             // a missing one is sluice.ErrNotFound
)

// PutConsumer creates the tenant's consumer uid or replaces its
// settings, and reports whether it created it: consumer.created or
// consumer.updated, with the fields the update changed.
func (c *Control) PutConsumer(ctx context.Context, who Caller, uid string, in ConsumerInput) (sluice.Consumer, bool, error) {
	return c.putConsumer(ctx, who, uid, in, createOrUpdate)
}

// CreateConsumer creates the tenant's consumer uid; a uid taken already
// is sluice.ErrConflict, never overwritten.
func (c *Control) CreateConsumer(ctx context.Context, who Caller, uid string, in ConsumerInput) (sluice.Consumer, error) {
	out, _, err := c.putConsumer(ctx, who, uid, in, createOnly)
	return out, err
}

// UpdateConsumer replaces the settings of the tenant's consumer uid; its
// uid never changes.
func (c *Control) UpdateConsumer(ctx context.Context, who Caller, uid string, in ConsumerInput) (sluice.Consumer, error) {
	out, _, err := c.putConsumer(ctx, who, uid, in, updateOnly)
	return out, err
}

func (c *Control) putConsumer(ctx context.Context, who Caller, uid string, in ConsumerInput, mode putMode) (sluice.Consumer, bool, error) {
	v := &sluice.ValidationError{}
	if !sluice.ValidConsumerUID(uid) {
		v.Add("uid", "%s", sluice.ConsumerUIDRule)
	}
	set, err := consumerSettings(in.Name, in.AlertEmail)
	var bad *sluice.ValidationError
	if errors.As(err, &bad) {
		v.Fields = append(v.Fields, bad.Fields...)
	}
	if err := v.Err(); err != nil {
		return sluice.Consumer{}, false, err
	}
	act := ConsumerUpdated
	if mode == createOnly {
		act = ConsumerCreated
	}
	var (
		out     sluice.Consumer
		created bool
	)
	err = c.change(ctx, who, act, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		old, err := c.store.GetConsumer(ctx, who.Tenant, uid)
		switch {
		case err == nil && mode == createOnly:
			return fmt.Errorf("%w: a consumer with the uid %s exists already", sluice.ErrConflict, uid)
		case errors.Is(err, sluice.ErrNotFound) && mode == updateOnly:
			return err
		case err != nil && !errors.Is(err, sluice.ErrNotFound):
			return fmt.Errorf("put consumer: %w", err)
		}
		existed := err == nil
		out, created, err = c.store.UpsertConsumer(ctx, who.Tenant, uid, set)
		if err != nil {
			return fmt.Errorf("put consumer: %w", err)
		}
		e.ObjectID = &uid
		if created {
			e.Action = string(ConsumerCreated)
		} else {
			e.Action = string(ConsumerUpdated)
		}
		if existed {
			e.Changed = consumerChanges(old, out)
		}
		return nil
	})
	return out, created, err
}

// consumerChanges names the settings that differ between old and new.
func consumerChanges(old, new sluice.Consumer) []string {
	var changed []string
	if !equalPtr(old.AlertEmail, new.AlertEmail) {
		changed = append(changed, "alert_email")
	}
	if old.Name != new.Name {
		changed = append(changed, "name")
	}
	return changed
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Consumer is one of the tenant's consumers.
func (c *Control) Consumer(ctx context.Context, who Caller, uid string) (sluice.Consumer, error) {
	if who.portal() || !sluice.ValidConsumerUID(uid) {
		return sluice.Consumer{}, sluice.ErrNotFound
	}
	return c.store.GetConsumer(ctx, who.Tenant, uid)
}

// Consumers is a page of the tenant's consumers, newest first.
func (c *Control) Consumers(ctx context.Context, who Caller, p sluice.PageParams) (sluice.Page[sluice.Consumer], error) {
	if who.portal() {
		return sluice.Page[sluice.Consumer]{}, nil
	}
	return c.store.ListConsumers(ctx, who.Tenant, p)
}

// DeleteConsumer deletes the tenant's consumer uid with its endpoints,
// their subscriptions and deliveries, and its portal sessions; its events
// stay.
func (c *Control) DeleteConsumer(ctx context.Context, who Caller, uid string) error {
	return c.change(ctx, who, ConsumerDeleted, func(ctx context.Context, e *sluice.AuditEntry) error {
		if _, err := c.Consumer(ctx, who, uid); err != nil {
			return err
		}
		e.ObjectID = &uid
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteConsumer, dbq.DeleteConsumerParams{TenantID: who.Tenant, Uid: uid}); err != nil {
			return fmt.Errorf("delete consumer: %w", err)
		}
		return nil
	})
}

// PortalLinkInput is what a new portal link is to be.
type PortalLinkInput struct {
	// TTLSeconds is how long it works; nil means DefaultPortalTTL.
	TTLSeconds *int64
	// ReadOnly links may look but change nothing.
	ReadOnly bool
}

// CreatePortalLink signs a link that signs the tenant's consumer uid in
// to its portal until it expires or the consumer's links are revoked.
// The link itself is a secret: the audit entry names only the consumer.
func (c *Control) CreatePortalLink(ctx context.Context, who Caller, uid string, in PortalLinkInput) (sluice.PortalLink, error) {
	ttl := DefaultPortalTTL
	if s := in.TTLSeconds; s != nil {
		if *s < 1 || *s > int64(MaxPortalTTL/time.Second) {
			v := &sluice.ValidationError{}
			v.Add("ttl_seconds", "must be a whole number of seconds from 1 to %d (7 days)", int64(MaxPortalTTL/time.Second))
			return sluice.PortalLink{}, v
		}
		ttl = time.Duration(*s) * time.Second
	}
	var link sluice.PortalLink
	err := c.change(ctx, who, PortalLinkCreated, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() || !sluice.ValidConsumerUID(uid) {
			return sluice.ErrNotFound
		}
		// a new link signs the consumer's current generation
		row, err := store.Read(ctx, c.store, (*dbq.Queries).GetConsumer, dbq.GetConsumerParams{TenantID: who.Tenant, Uid: uid})
		if err != nil {
			return fmt.Errorf("read consumer: %w", err)
		}
		e.ObjectID = &uid
		expires := c.now().Add(ttl).Truncate(time.Second).UTC()
		link = c.links.link(row.Consumer.ID, row.Consumer.PortalGeneration, expires, in.ReadOnly)
		return nil
	})
	return link, err
}

// RevokePortal voids every portal link of the tenant's consumer uid and
// ends its portal sessions, at once, on every process.
func (c *Control) RevokePortal(ctx context.Context, who Caller, uid string) error {
	return c.change(ctx, who, PortalLinkRevoked, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() || !sluice.ValidConsumerUID(uid) {
			return sluice.ErrNotFound
		}
		e.ObjectID = &uid
		return c.store.RevokePortal(ctx, who.Tenant, uid)
	})
}

// MissingConsumers are the uids among uids that name no consumer of the
// tenant, found with one query: what a post of events addressed to
// consumers checks first.
func (c *Control) MissingConsumers(ctx context.Context, tenant uuid.UUID, uids []string) ([]string, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	found, err := store.Read(ctx, c.store, (*dbq.Queries).ConsumersByUID, dbq.ConsumersByUIDParams{TenantID: tenant, Uids: uids})
	if err != nil {
		return nil, fmt.Errorf("consumers by uid: %w", err)
	}
	var missing []string
	for _, uid := range uids {
		if !slices.Contains(found, uid) {
			missing = append(missing, uid)
		}
	}
	return missing, nil
}
