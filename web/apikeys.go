package web

import (
	"time"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// SectionAPIKeys is the API keys page's nav section.
const SectionAPIKeys = "api-keys"

// APIKeyExpiryDays are the expiry choices of the dashboard's create form,
// in days from now; the form's "never" is none of them.
var APIKeyExpiryDays = []int{7, 30, 90, 365}

// APIKeysView is the API keys page.
type APIKeysView struct {
	Keys    []sluice.APIKey
	Older   string
	Current uuid.UUID // the key this session was opened with
	Now     time.Time // to mark expired keys
	// Created is the key just created, shown this once.
	Created *sluice.NewAPIKey
	// Revoked flashes that a key was just revoked.
	Revoked bool
	// Error says why the create form was refused; Name refills it.
	Error string
	Name  string
}

// RevokeAPIKeyView is the confirmation step of revoking a key.
type RevokeAPIKeyView struct {
	Key     sluice.APIKey
	Current bool // the session's own key: revoking it signs out
}

func revokeAPIKeyPath(id uuid.UUID) string { return "/api-keys/" + id.String() + "/revoke" }
