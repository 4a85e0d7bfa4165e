package sluice

import (
	"time"

	"github.com/google/uuid"
)

// Tenant is a company that sends webhooks to its own customers.
type Tenant struct {
	ID         uuid.UUID `json:"tenant_id"`
	Name       string    `json:"name"`
	AlertEmail string    `json:"alert_email"`
	CreatedAt  time.Time `json:"created_at"`
	// DisabledAt is when an operator disabled the tenant (sluice tenant
	// disable); nil while it is enabled. A disabled tenant's API keys
	// answer 403 and its dashboard sessions are gone.
	DisabledAt *time.Time `json:"disabled_at"`
}

// Disabled reports whether an operator has disabled the tenant.
func (t Tenant) Disabled() bool { return t.DisabledAt != nil }
