package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

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
