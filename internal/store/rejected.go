package store

import "github.com/sluice-dev/sluice/internal/sluice"

// RowRejected is sluice.RowRejected: whether err is Postgres refusing the
// data of a statement rather than failing to run it.
func RowRejected(err error) bool { return sluice.RowRejected(err) }
