package web

import (
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// EndpointForm is the endpoint form's fields, as sent or as filled from an
// endpoint.
type EndpointForm struct {
	Delivery    string // "push" or "poll"; chosen when creating only
	URL         string
	Description string
	RateKind    string // "", "per_second" or "per_minute"
	Rate        string
	Burst       string
	Adaptive    bool
	Min         string // an adaptive rate's floor, deliveries a second
	MaxInFlight string
	Disabled    bool
	FIFO        bool // ordering "fifo"
	// BacklogQueued and BacklogOldest are the backlog alert's thresholds:
	// deliveries queued and seconds waited; both empty for none.
	BacklogQueued string
	BacklogOldest string
	// Options are the delivery options as typed, by json name: "" for
	// the server's default.
	Options map[string]string
	// Types are the ticked event types: "*" or names of the catalogue.
	Types map[string]bool
	// Patterns are free-text patterns (a tenant's only), space-separated.
	Patterns string
	// Filter is the subscription's payload filter, JSON; "" for none.
	Filter string
	// FilterPayload is a payload pasted to try the filter on.
	FilterPayload string
}

// FilterTest is the answer of the form's "Test the filter" on one payload.
type FilterTest struct {
	Source  string // "the pasted payload", or the event type whose example it is
	Matches bool
	Error   string // why the payload could not be tried
}

// EndpointFormView is the page that creates or edits an endpoint with its
// subscription.
type EndpointFormView struct {
	Endpoint  *sluice.Endpoint // nil when creating
	Form      EndpointForm
	Catalogue []sluice.EventType
	// Free offers the free-text patterns field: a tenant's sessions only.
	Free  bool
	Error string // why the form was refused
	// FilterTests answer "Test the filter"; FilterNote says what kept it
	// from answering, or warns about the filters the form replaces.
	FilterTests []FilterTest
	FilterNote  string
}

// ConfirmView is the confirmation step of a destructive action: what it
// does, and the one form that does it.
type ConfirmView struct {
	Title    string
	Question string
	Detail   string
	Action   string // the form's action
	Button   string
	// Danger marks an action that cannot be undone: its button is red.
	Danger bool
	Back   string
}

// SecretView shows an endpoint's signing secret, once asked for.
type SecretView struct {
	Endpoint sluice.Endpoint
	Secret   string
	Rotated  bool   // it was just made: the old one signs beside it for a while
	PollURL  string // a poll endpoint's, which changes with the secret
	// PublicKey is the v1a public key of an endpoint that signs v1a.
	PublicKey string
}

// endpointName is how a page names an endpoint: its URL, or for a poll
// endpoint (which has none) its description or id.
func endpointName(e sluice.Endpoint) string {
	switch {
	case e.URL != "":
		return e.URL
	case e.Description != "":
		return e.Description + " (poll)"
	default:
		return e.ID.String() + " (poll)"
	}
}

func newEndpointPath() string                 { return "/endpoints/new" }
func editEndpointPath(id uuid.UUID) string    { return endpointPath(id) + "/edit" }
func deleteEndpointPath(id uuid.UUID) string  { return endpointPath(id) + "/delete" }
func secretPath(id uuid.UUID) string          { return endpointPath(id) + "/secret" }
func rotateSecretPath(id uuid.UUID) string    { return secretPath(id) + "/rotate" }
func testEndpointPath(id uuid.UUID) string    { return endpointPath(id) + "/test" }
func closeCircuitPath(id uuid.UUID) string    { return endpointPath(id) + "/circuit/close" }
func liftThrottlePath(id uuid.UUID) string    { return endpointPath(id) + "/throttle/lift" }
func verifyEndpointPath(id uuid.UUID) string  { return endpointPath(id) + "/verify" }
func disableEndpointPath(id uuid.UUID) string { return endpointPath(id) + "/disable" }
func formAction(v EndpointFormView) string {
	if v.Endpoint == nil {
		return "/endpoints"
	}
	return editEndpointPath(v.Endpoint.ID)
}
