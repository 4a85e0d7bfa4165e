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
}
