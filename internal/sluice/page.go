package sluice

import "github.com/google/uuid"

// Page limits for list calls.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
	// MaxPageBytes ends a page of events (GET /v1/events, a poll page)
	// early, at the first item whose payload would take what the page's
	// payloads hold, as stored, past it; a page holds one item at least.
	MaxPageBytes = 10 << 20
)

// PageParams select one page of a list, newest first: at most Limit items
// whose ids sort before After (all items when After is nil).
type PageParams struct {
	Limit int
	After *uuid.UUID
}

// Page is one page of a list; Next is the cursor of the following page, nil
// on the last one.
type Page[T any] struct {
	Items []T
	Next  *uuid.UUID
}
