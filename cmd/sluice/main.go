// Command sluice is the Sluice server and its admin tool: serve, migrate,
// tenant create, list, set-rate, disable and enable, and apikey create,
// list and revoke; and listen, which forwards a poll endpoint's deliveries
// to a local URL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/db"
	"github.com/sluice-dev/sluice/internal/apikey"
	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

const usage = `usage:
  sluice serve [--api] [--worker] [--dashboard]   run the chosen roles (default: all)
  sluice version                                  print the version of this build
  sluice migrate                                  apply database migrations
  sluice tenant create --name N --alert-email E   create a tenant and its first API key
  sluice tenant list                              list every tenant (id, name, alert email, created, disabled)
  sluice tenant set-rate --tenant ID --rate R     a tenant's own API rate (50/s, 600/m or default)
  sluice tenant disable --tenant ID               refuse its API keys (403) and end its dashboard sessions
  sluice tenant enable --tenant ID                undo tenant disable
  sluice apikey create --tenant ID [--name N]     create another API key for a tenant
  sluice apikey list --tenant ID                  list a tenant's API keys (never the keys)
  sluice apikey revoke --id ID                    revoke an API key at once
  sluice keys rotate --new-key K                  seal every data key and secret again under a new master key
  sluice listen --poll-url U --forward-to L [--secret S] [--cursor-file F]
                                                  post a poll endpoint's deliveries to a local URL, signed
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger, err := newLogger(os.Stderr, os.Getenv("SLUICE_LOG_FORMAT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(2)
	}
	if err := run(ctx, os.Args[1:], os.Stdout, logger); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("no command\n%s", usage)
	}
	switch cmd := args[0]; {
	case cmd == "serve":
		return serve(ctx, args[1:], logger)
	case cmd == "version":
		if _, err := fmt.Fprintln(stdout, sluice.VersionString()); err != nil {
			return fmt.Errorf("print version: %w", err)
		}
		return nil
	case cmd == "migrate":
		return migrateCmd(ctx, logger)
	case cmd == "tenant" && len(args) > 1 && args[1] == "create":
		return tenantCreate(ctx, args[2:], stdout)
	case cmd == "tenant" && len(args) > 1 && args[1] == "list":
		return tenantList(ctx, args[2:], stdout)
	case cmd == "tenant" && len(args) > 1 && args[1] == "set-rate":
		return tenantSetRate(ctx, args[2:], stdout)
	case cmd == "tenant" && len(args) > 1 && args[1] == "disable":
		return tenantSetDisabled(true)(ctx, args[2:], stdout)
	case cmd == "tenant" && len(args) > 1 && args[1] == "enable":
		return tenantSetDisabled(false)(ctx, args[2:], stdout)
	case cmd == "apikey" && len(args) > 1 && args[1] == "create":
		return apikeyCreate(ctx, args[2:], stdout)
	case cmd == "apikey" && len(args) > 1 && args[1] == "list":
		return apikeyList(ctx, args[2:], stdout)
	case cmd == "apikey" && len(args) > 1 && args[1] == "revoke":
		return apikeyRevoke(ctx, args[2:], stdout)
	case cmd == "keys" && len(args) > 1 && args[1] == "rotate":
		return keysRotate(ctx, args[2:], stdout)
	case cmd == "listen":
		return listenCmd(ctx, args[1:], stdout, logger)
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

func serve(ctx context.Context, args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var roles app.Roles
	fs.BoolVar(&roles.API, "api", false, "serve the REST API")
	fs.BoolVar(&roles.Worker, "worker", false, "run the delivery workers")
	fs.BoolVar(&roles.Dashboard, "dashboard", false, "serve the dashboard")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !roles.API && !roles.Worker && !roles.Dashboard {
		roles = app.Roles{API: true, Worker: true, Dashboard: true}
	}
	cfg, err := config.FromEnv(true)
	if err != nil {
		return err
	}
	return app.Serve(ctx, cfg, roles, logger)
}

func migrateCmd(ctx context.Context, logger *slog.Logger) error {
	cfg, err := config.FromEnv(false)
	if err != nil {
		return err
	}
	pool, err := app.OpenSessionPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	return db.Migrate(ctx, pool, logger)
}

func tenantCreate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenant create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "tenant name")
	alertEmail := fs.String("alert-email", "", "address for circuit-breaker alerts")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name is required")
	}
	if _, err := mail.ParseAddress(*alertEmail); err != nil {
		return fmt.Errorf("--alert-email must be an email address: %w", err)
	}
	return withStore(ctx, func(ctx context.Context, s *store.Store) error {
		key := apikey.New()
		tenant, err := s.CreateTenant(ctx, *name, *alertEmail, apikey.Digest(key))
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(struct {
			TenantID string `json:"tenant_id"`
			APIKey   string `json:"api_key"`
		}{tenant.ID.String(), key})
	})
}

func apikeyCreate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tenant := tenantFlag(fs)
	name := fs.String("name", "cli", "a name for the key, to recognise it in lists")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tenantID, err := tenant()
	if err != nil {
		return err
	}
	p := sluice.NewAPIKeyParams{Name: *name}
	if err := p.Validate(time.Now()); err != nil {
		return fmt.Errorf("--name: %w", err)
	}
	return withStore(ctx, func(ctx context.Context, s *store.Store) error {
		key := apikey.New()
		if _, err := s.CreateAPIKey(ctx, tenantID, p, apikey.Digest(key)); err != nil {
			return fmt.Errorf("tenant %s: %w", tenantID, err)
		}
		return json.NewEncoder(stdout).Encode(map[string]string{"api_key": key})
	})
}

func apikeyList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("apikey list", flag.ContinueOnError)
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
		if _, err := s.GetTenant(ctx, tenantID); err != nil {
			return fmt.Errorf("tenant %s: %w", tenantID, err)
		}
		keys := []sluice.APIKey{}
		p := sluice.PageParams{Limit: sluice.MaxPageLimit}
		for {
			page, err := s.ListAPIKeys(ctx, tenantID, p)
			if err != nil {
				return err
			}
			keys = append(keys, page.Items...)
			if page.Next == nil {
				break
			}
			p.After = page.Next
		}
		return json.NewEncoder(stdout).Encode(map[string][]sluice.APIKey{"api_keys": keys})
	})
}

func apikeyRevoke(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("apikey revoke", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	idFlag := fs.String("id", "", "API key id (from apikey list)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	id, err := uuid.Parse(*idFlag)
	if err != nil {
		return fmt.Errorf("--id must be an API key id: %w", err)
	}
	return withStore(ctx, func(ctx context.Context, s *store.Store) error {
		key, tenantID, err := s.RevokeAPIKeyByID(ctx, id)
		if err != nil {
			return fmt.Errorf("API key %s: %w", id, err)
		}
		return json.NewEncoder(stdout).Encode(map[string]string{
			"revoked": key.ID.String(), "tenant_id": tenantID.String(), "prefix": key.Prefix,
		})
	})
}

// withStore opens the database for one admin command. Tenant and key
// commands touch no secrets, so the encryption key may be absent.
func withStore(ctx context.Context, fn func(context.Context, *store.Store) error) error {
	return withConfigStore(ctx, false, func(ctx context.Context, _ config.Config, st *store.Store) error {
		return fn(ctx, st)
	})
}

// withConfigStore reads the configuration (the encryption key required
// when needKey) and opens the database for one admin command.
func withConfigStore(ctx context.Context, needKey bool, fn func(context.Context, config.Config, *store.Store) error) error {
	cfg, err := config.FromEnv(needKey)
	if err != nil {
		return err
	}
	pool, err := app.OpenPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool, nil)
	defer st.Close()
	return fn(ctx, cfg, st)
}

// parseFlags parses a subcommand's flags; the error names the subcommand.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parse %s flags: %w", fs.Name(), err)
	}
	return nil
}

// tenantFlag defines the --tenant flag on fs and returns its parser, which
// names the flag in its error.
func tenantFlag(fs *flag.FlagSet) func() (uuid.UUID, error) {
	raw := fs.String("tenant", "", "tenant id")
	return func() (uuid.UUID, error) {
		id, err := uuid.Parse(*raw)
		if err != nil {
			return uuid.Nil, fmt.Errorf("--tenant must be a tenant id: %w", err)
		}
		return id, nil
	}
}
