package sluice

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// How a failed database call is answered: these two predicates sort the
// errors the store hands up (from pgx, the database driver) for the doors,
// which classify them without importing the store.

// Unavailable reports whether err means that the database cannot be
// reached or cannot serve right now — a condition that passes without
// anything changing on the caller's side, so that the caller should answer
// "try again shortly" (503 with Retry-After) instead of "internal error":
//
//   - the connection could not be made (*pgconn.ConnectError), was closed
//     ("conn closed"), or broke mid-conversation (a net.Error, an
//     unexpected EOF);
//   - waiting for the database, or for a pooled connection, ran past a
//     deadline (context.DeadlineExceeded; a client going away is
//     context.Canceled instead, and is not this);
//   - the server said so: SQLSTATE class 08 (connection exception),
//     57P01/57P02/57P03 (administrator or crash shutdown, cannot connect
//     now) or 53300 (too many connections).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		pgErr      *pgconn.PgError
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &pgErr):
		return unavailableState(pgErr.Code)
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded):
		return true
	default:
		return false
	}
}

// NotConnected reports whether err says no connection to the database
// could be made (*pgconn.ConnectError: every host refused, was not
// there, or is not the primary): nothing was sent, so the call did
// nothing and may be made again as it is, even one that writes.
func NotConnected(err error) bool {
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr)
}

// unavailableState reports whether a SQLSTATE says the server cannot serve
// now, rather than that the statement is wrong.
func unavailableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "53300":
		return true
	default:
		return strings.HasPrefix(code, "08")
	}
}

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
