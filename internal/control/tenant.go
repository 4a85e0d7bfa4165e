package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// The tenant's own settings (GET and PATCH /v1/tenant, the dashboard's
// settings page): for now its retention. A tenant's own retention is
// shorter than the server's or the same; what is past it is out of every
// read at once, and the retention job deletes it (package maintenance).

// DefaultRetention and DefaultDeadRetention are SLUICE_RETENTION's and
// SLUICE_DEAD_RETENTION's defaults.
const (
	DefaultRetention     = 336 * time.Hour
	DefaultDeadRetention = 720 * time.Hour
)

// MinRetention is the shortest retention a tenant may set.
const MinRetention = time.Hour

// TenantSettings is what a tenant sees of its own settings.
type TenantSettings struct {
	Tenant sluice.Tenant
	// Retention and DeadRetention are the tenant's own; nil is the
	// server's.
	Retention, DeadRetention *time.Duration
	// ServerRetention and ServerDeadRetention are the server's: the
	// defaults, and the longest a tenant may set.
	ServerRetention, ServerDeadRetention time.Duration
}

// RetentionChange is a change of a tenant's own retention: each field
// that is Set becomes Value, a Go duration ("72h"), or the server's when
// Value is nil; the others stay as they are.
type RetentionChange struct {
	Retention, DeadRetention DurationChange
}

// DurationChange is one field of RetentionChange.
type DurationChange struct {
	Set   bool
	Value *string
}

// TenantSettings returns the caller's tenant's settings; every member
// may read them, a portal caller none.
func (c *Control) TenantSettings(ctx context.Context, who Caller) (TenantSettings, error) {
	if who.portal() {
		return TenantSettings{}, sluice.ErrNotFound
	}
	return c.tenantSettings(ctx, who)
}

// SetTenantRetention changes the caller's tenant's own retention
// (tenant.retention_updated, naming the fields that changed): each is at
// least MinRetention and at most the server's, else a
// *sluice.ValidationError naming it.
func (c *Control) SetTenantRetention(ctx context.Context, who Caller, in RetentionChange) (TenantSettings, error) {
	v := &sluice.ValidationError{}
	retention := c.parseRetention(v, "retention", in.Retention.Value, c.cfg.Retention)
	dead := c.parseRetention(v, "dead_retention", in.DeadRetention.Value, c.cfg.DeadRetention)
	if err := v.Err(); err != nil {
		return TenantSettings{}, err
	}
	var out TenantSettings
	err := c.change(ctx, who, TenantRetentionUpdated, func(ctx context.Context, e *sluice.AuditEntry) error {
		if who.portal() {
			return sluice.ErrNotFound
		}
		old, err := c.tenantSettings(ctx, who)
		if err != nil {
			return err
		}
		out = old
		if in.Retention.Set {
			out.Retention = retention
		}
		if in.DeadRetention.Set {
			out.DeadRetention = dead
		}
		err = store.Exec(ctx, c.store, (*dbq.Queries).SetTenantRetention, dbq.SetTenantRetentionParams{
			TenantID: who.Tenant, RetentionSeconds: seconds(out.Retention), DeadRetentionSeconds: seconds(out.DeadRetention),
		})
		if err != nil {
			return fmt.Errorf("set tenant retention: %w", err)
		}
		e.ObjectID = object(who.Tenant)
		if !equalPtr(old.Retention, out.Retention) {
			e.Changed = append(e.Changed, "retention")
		}
		if !equalPtr(old.DeadRetention, out.DeadRetention) {
			e.Changed = append(e.Changed, "dead_retention")
		}
		return nil
	})
	return out, err
}

// tenantSettings reads the settings of the caller's tenant.
func (c *Control) tenantSettings(ctx context.Context, who Caller) (TenantSettings, error) {
	out := TenantSettings{ServerRetention: c.cfg.Retention, ServerDeadRetention: c.cfg.DeadRetention}
	t, err := store.Read(ctx, c.store, (*dbq.Queries).GetTenant, who.Tenant)
	if err != nil {
		return out, fmt.Errorf("get tenant: %w", err)
	}
	out.Tenant = sluice.Tenant{ID: t.ID, Name: t.Name, AlertEmail: t.AlertEmail, CreatedAt: t.CreatedAt, DisabledAt: t.DisabledAt}
	r, err := store.Read(ctx, c.store, (*dbq.Queries).TenantRetention, who.Tenant)
	switch {
	case errors.Is(err, sluice.ErrNotFound):
	case err != nil:
		return out, fmt.Errorf("get tenant retention: %w", err)
	default:
		out.Retention, out.DeadRetention = duration(r.RetentionSeconds), duration(r.DeadRetentionSeconds)
	}
	return out, nil
}

// parseRetention is s as a retention of field, nil for nil; a bad one is
// added to v.
func (c *Control) parseRetention(v *sluice.ValidationError, field string, s *string, most time.Duration) *time.Duration {
	if s == nil {
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(*s))
	switch {
	case err != nil:
		v.Add(field, "must be a Go duration such as 72h")
	case d < MinRetention || d > most:
		v.Add(field, "must be from %s to the server's %s", FormatDuration(MinRetention), FormatDuration(most))
	case d%time.Second != 0:
		v.Add(field, "must be whole seconds")
	default:
		return &d
	}
	return nil
}

// FormatDuration is d as a Go duration without its zero tail: "72h",
// "1h30m".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func seconds(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	s := int64(*d / time.Second)
	return &s
}

func duration(s *int64) *time.Duration {
	if s == nil {
		return nil
	}
	d := time.Duration(*s) * time.Second
	return &d
}
