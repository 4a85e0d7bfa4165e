package sluice

import "github.com/google/uuid"

// Page limits for list calls.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
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
