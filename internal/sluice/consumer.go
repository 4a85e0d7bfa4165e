package sluice

import (
	"encoding/json"
	"regexp"
	"time"

	"github.com/google/uuid"
)

// Consumer is one of a tenant's own customers, named by the tenant's id for
// it (UID). Its endpoints receive only the events addressed to it and
// broadcasts; its alert address, when set, gets its endpoints' circuit
// emails instead of the tenant's.
type Consumer struct {
	ID            uuid.UUID `json:"-"`
	TenantID      uuid.UUID `json:"-"`
	UID           string    `json:"uid"`
	Name          string    `json:"name"`
	AlertEmail    *string   `json:"alert_email"`
	EndpointCount int64     `json:"endpoint_count"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// ConsumerSettings are the fields of a consumer a tenant chooses.
type ConsumerSettings struct {
	Name       string
	AlertEmail *string
}

// consumerUIDRE is what a consumer uid may hold: 1 to 64 of A-Z a-z 0-9 . _ : -.
var consumerUIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidConsumerUID reports whether uid may name a consumer.
func ValidConsumerUID(uid string) bool { return consumerUIDRE.MatchString(uid) }

// ConsumerUIDRule says what ValidConsumerUID accepts, for error messages.
const ConsumerUIDRule = "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'"

// EventType is an entry of a tenant's event-type catalogue. Schema, when
// set, is a JSON Schema (2020-12) that every posted event of the type must
// satisfy.
type EventType struct {
	ID          uuid.UUID       `json:"-"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Example     json.RawMessage `json:"example"`
	Schema      json.RawMessage `json:"schema"`
	Deprecated  bool            `json:"deprecated"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// PortalLink is a signed, expiring link that signs a consumer in to its
// portal.
type PortalLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}
