// Package operator serves River's own web UI (riverqueue.com/riverui) to
// Sluice's operators at /riverui/: every job and queue of every tenant,
// behind the operator token (SLUICE_OPERATOR_TOKEN), never a tenant's API
// key.
package operator

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
)

// Prefix is where the UI is mounted; its JSON API is under Prefix + "/api".
const Prefix = "/riverui"

// UI is River's web UI behind the operator token.
type UI struct {
	ui      *riverui.Handler
	handler http.Handler
}

// New builds the UI over client, open to requests carrying token (see
// requireToken). token must not be empty.
func New(client *river.Client[pgx.Tx], token string, logger *slog.Logger) (*UI, error) {
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    Prefix,
	})
	if err != nil {
		return nil, fmt.Errorf("make river UI handler: %w", err)
	}
	// Browsers send Basic credentials with cross-site requests too: refuse
	// cross-origin writes (cancel, delete, retry, pause) by their
	// Sec-Fetch-Site or Origin headers.
	h := http.NewCrossOriginProtection().Handler(ui)
	return &UI{ui: ui, handler: requireToken(token, h)}, nil
}

// Start starts the UI's background services (count caches); they stop
// when ctx ends.
func (u *UI) Start(ctx context.Context) error {
	if err := u.ui.Start(ctx); err != nil {
		return fmt.Errorf("start river UI: %w", err)
	}
	return nil
}

// Mount serves the UI at Prefix on r.
func (u *UI) Mount(r chi.Router) {
	r.Handle(Prefix, u.handler)
	r.Handle(Prefix+"/*", u.handler)
}
