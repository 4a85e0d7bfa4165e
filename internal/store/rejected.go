package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// RowRejected reports whether err is Postgres refusing the data of a
// statement rather than failing to run it: a data exception (class 22,
// such as invalid UTF-8 or a NUL byte in text), an integrity constraint
// violation (class 23) or a program limit exceeded (class 54, such as a
// value too large to index). Such an error is the fault of some row; in a
// statement that writes many callers' rows, the others may commit without
// it. Errors about the connection, the server or the context are not.
func RowRejected(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	default:
		return false
	}
}
