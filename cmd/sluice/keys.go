package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/store"
)

// keysRotate is `sluice keys rotate --new-key K`: everything sealed by the
// master key (tenants' data keys, endpoints' secrets) sealed again under
// K, while Sluice serves (app.RotateKeys). SLUICE_ENCRYPTION_KEY and
// SLUICE_PREVIOUS_ENCRYPTION_KEY are the keys it may be sealed by now.
func keysRotate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys rotate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	newKey := fs.String("new-key", "", "the new master key: 32 bytes, base64 or hex")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *newKey == "" {
		return errors.New("--new-key is required: 32 bytes, base64 or hex (e.g. openssl rand -base64 32)")
	}
	key, err := secretbox.ParseKey(*newKey)
	if err != nil {
		return fmt.Errorf("--new-key: %w", err)
	}
	var rotated app.Rotated
	err = withConfigStore(ctx, true, func(ctx context.Context, cfg config.Config, st *store.Store) error {
		from, err := secretbox.New(key, cfg.EncryptionKey, cfg.PreviousEncryptionKey)
		if err != nil {
			return err
		}
		to, err := secretbox.New(key)
		if err != nil {
			return err
		}
		rotated, err = app.RotateKeys(ctx, st, from, to)
		return err
	})
	if err != nil {
		return err
	}
	if err := json.NewEncoder(stdout).Encode(rotated); err != nil {
		return fmt.Errorf("print result: %w", err)
	}
	return nil
}
