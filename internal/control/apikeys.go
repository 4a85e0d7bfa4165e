package control

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// API keys: the tenant's credentials for the API (and for signing in to
// the dashboard). A key is made here and shown once, at creation; the
// store keeps its digest (apikey.Digest). They are the tenant's own
// objects: a portal caller sees none of them.

// CreateAPIKey makes a key for the tenant and returns it, in plaintext
// this once.
func (c *Control) CreateAPIKey(ctx context.Context, who Caller, p sluice.NewAPIKeyParams) (sluice.NewAPIKey, error) {
	if err := p.Validate(c.now()); err != nil {
		return sluice.NewAPIKey{}, err //nolint:wrapcheck // the caller's fault, said as is
	}
	var out sluice.NewAPIKey
	err := c.change(ctx, who, APIKeyCreated, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		key := apikey.New()
		k, err := c.store.CreateAPIKey(ctx, who.Tenant, p, apikey.Digest(key))
		if err != nil {
			return fmt.Errorf("create api key: %w", err)
		}
		e.ObjectID = object(k.ID)
		out = sluice.NewAPIKey{Key: key, APIKey: k}
		return nil
	})
	return out, err
}

// APIKeys is a page of the tenant's keys, newest first, never the keys
// themselves; expired keys are listed until they are revoked.
func (c *Control) APIKeys(ctx context.Context, who Caller, p sluice.PageParams) (sluice.Page[sluice.APIKey], error) {
	if who.portal() {
		return sluice.Page[sluice.APIKey]{}, nil
	}
	return c.store.ListAPIKeys(ctx, who.Tenant, p)
}

// APIKey is one of the tenant's keys (never the key itself).
func (c *Control) APIKey(ctx context.Context, who Caller, id uuid.UUID) (sluice.APIKey, error) {
	if who.portal() {
		return sluice.APIKey{}, sluice.ErrNotFound
	}
	return c.store.GetAPIKey(ctx, who.Tenant, id)
}

// RevokeAPIKey deletes one of the tenant's keys, and with it every
// dashboard session opened with it; a key may revoke itself. It answers
// 401 within the API's key cache's lifetime on every process.
func (c *Control) RevokeAPIKey(ctx context.Context, who Caller, id uuid.UUID) error {
	return c.change(ctx, who, APIKeyRevoked, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		e.ObjectID = object(id)
		if err := store.ExecRows(ctx, c.store, (*dbq.Queries).DeleteAPIKey, dbq.DeleteAPIKeyParams{TenantID: who.Tenant, ID: id}); err != nil {
			return fmt.Errorf("delete api key: %w", err)
		}
		return nil
	})
}

// Authenticate resolves an API key to what it authenticates as. A key
// that is malformed, does not exist, was revoked or has expired is
// sluice.ErrNotFound; a disabled tenant's key resolves, with
// Tenant.DisabledAt set, for the door to refuse. It is not a change and
// is not recorded (the key's use is, at most once a minute).
func (c *Control) Authenticate(ctx context.Context, key string) (sluice.Credential, error) {
	if !apikey.WellFormed(key) {
		return sluice.Credential{}, sluice.ErrNotFound
	}
	return c.store.AuthenticateAPIKey(ctx, apikey.Hash(key))
}
