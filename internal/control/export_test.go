package control

import "github.com/google/uuid"

// WatchForget makes c call f where it tells its poll reader to forget an
// endpoint.
func WatchForget(c *Control, f func(endpointID uuid.UUID)) { c.forget = f }
