package web

import (
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// ConsumersView is the tenant's consumers list, with the form that
// creates one.
type ConsumersView struct {
	Consumers []sluice.Consumer
	Older     string
	Flash     string // the outcome of the last action, if any
	// Form refills the create form; Error says why it was refused.
	Form  ConsumerForm
	Error string
}

// ConsumerForm is the consumer form's fields, as sent or as filled from a
// consumer.
type ConsumerForm struct {
	UID        string
	Name       string
	AlertEmail string
}

// ConsumerView is one consumer with its endpoints, and its portal links.
type ConsumerView struct {
	Consumer  sluice.Consumer
	Endpoints []sluice.Endpoint
	Older     string
	Flash     string // the outcome of the last action, if any
	// Link is a portal link just issued, shown this once.
	Link         *sluice.PortalLink
	LinkReadOnly bool
}

// ConsumerFormView is the page that edits a consumer.
type ConsumerFormView struct {
	Consumer sluice.Consumer
	Form     ConsumerForm
	Error    string // why the form was refused
}

// PortalTTL is a lifetime the portal link form offers.
type PortalTTL struct {
	Label string
	TTL   time.Duration
}

// PortalTTLs are the portal link form's lifetimes, the default first.
var PortalTTLs = []PortalTTL{
	{"1 hour", time.Hour},
	{"15 minutes", 15 * time.Minute},
	{"1 day", 24 * time.Hour},
	{"7 days", 7 * 24 * time.Hour},
}

func editConsumerPath(uid string) string   { return consumerPath(uid) + "/edit" }
func deleteConsumerPath(uid string) string { return consumerPath(uid) + "/delete" }
func portalLinkPath(uid string) string     { return consumerPath(uid) + "/portal" }
func revokePortalPath(uid string) string   { return portalLinkPath(uid) + "/revoke" }

// ConsumerPath is the page of the tenant's consumer uid.
func ConsumerPath(uid string) string { return consumerPath(uid) }
