package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// tenantView is how the CLI prints a tenant.
type tenantView struct {
	ID         uuid.UUID  `json:"id"`
	Name       string     `json:"name"`
	AlertEmail string     `json:"alert_email"`
	CreatedAt  time.Time  `json:"created_at"`
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabled_at"`
}

func viewTenant(t sluice.Tenant) tenantView {
	return tenantView{ID: t.ID, Name: t.Name, AlertEmail: t.AlertEmail, CreatedAt: t.CreatedAt,
		Disabled: t.Disabled(), DisabledAt: t.DisabledAt}
}

// tenantList is `sluice tenant list`: every tenant, newest first, as one
// line of JSON, {"tenants": [...]}, like `apikey list`.
func tenantList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenant list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tenant list takes no arguments, got %q", fs.Args())
	}
	return withStore(ctx, func(ctx context.Context, s *store.Store) error {
		tenants := []tenantView{}
		p := sluice.PageParams{Limit: sluice.MaxPageLimit}
		for {
			page, err := s.ListTenants(ctx, p)
			if err != nil {
				return err
			}
			for _, t := range page.Items {
				tenants = append(tenants, viewTenant(t))
			}
			if page.Next == nil {
				break
			}
			p.After = page.Next
		}
		return json.NewEncoder(stdout).Encode(map[string][]tenantView{"tenants": tenants})
	})
}

// tenantSetDisabled is `sluice tenant disable --tenant ID` (disabled) and
// `sluice tenant enable --tenant ID`; it prints the tenant as it is now.
func tenantSetDisabled(disabled bool) func(context.Context, []string, io.Writer) error {
	name := "tenant enable"
	if disabled {
		name = "tenant disable"
	}
	return func(ctx context.Context, args []string, stdout io.Writer) error {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		tenant := tenantFlag(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		tenantID, err := tenant()
		if err != nil {
			return err
		}
		return withStore(ctx, func(ctx context.Context, s *store.Store) error {
			t, err := s.SetTenantDisabled(ctx, tenantID, disabled)
			if err != nil {
				return fmt.Errorf("tenant %s: %w", tenantID, err)
			}
			return json.NewEncoder(stdout).Encode(viewTenant(t))
		})
	}
}
