package store

import "github.com/sluice-dev/sluice/internal/sluice"

// Unavailable is sluice.Unavailable: whether err means the database cannot
// be reached or cannot serve right now.
func Unavailable(err error) bool { return sluice.Unavailable(err) }
