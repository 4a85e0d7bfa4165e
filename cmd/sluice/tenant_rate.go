package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/internal/apirate"
	"github.com/sluice-dev/sluice/internal/store"
)

// tenantSetRate is `sluice tenant set-rate --tenant ID --rate 50/s`: the
// tenant's own limit on the API's rate ("default" returns it to
// SLUICE_API_RATE). Every API process applies it within about a second.
func tenantSetRate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenant set-rate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := tenantFlag(fs)
	rate := fs.String("rate", "", `the API rate, such as 50/s or 600/m, or "default"`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tenantID, err := tenant()
	if err != nil {
		return err
	}
	var text *string
	switch *rate {
	case "":
		return errors.New(`--rate is required: a rate such as 50/s or 600/m, or "default"`)
	case "default":
	default:
		r, err := apirate.Parse(*rate)
		if err != nil {
			return fmt.Errorf("--rate: %w", err)
		}
		s := r.String()
		text = &s
	}
	return withStore(ctx, func(ctx context.Context, s *store.Store) error {
		if err := s.SetTenantAPIRate(ctx, tenantID, text); err != nil {
			return fmt.Errorf("tenant %s: %w", tenantID, err)
		}
		out := "default"
		if text != nil {
			out = *text
		}
		return json.NewEncoder(stdout).Encode(map[string]string{"tenant_id": tenantID.String(), "api_rate": out})
	})
}
