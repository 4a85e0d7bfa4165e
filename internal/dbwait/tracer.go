package dbwait

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tracer is a pgx tracer (pgx.ConnConfig.Tracer of a pool) that runs a
// request's budget (Bound) while the request acquires a connection or
// runs a statement, batch or COPY, and marks the request's context
// (WatchCommit) when a commit is sent with it: an explicit COMMIT, or,
// outside a transaction, a statement, batch or COPY that may write
// (anything but a plain SELECT), which commits on its own. For other
// contexts it does nothing.
type Tracer struct{}

var (
	_ pgx.QueryTracer       = Tracer{}
	_ pgx.BatchTracer       = Tracer{}
	_ pgx.CopyFromTracer    = Tracer{}
	_ pgxpool.AcquireTracer = Tracer{}
)

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (Tracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	enter(ctx)
	return ctx
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (Tracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	leave(ctx)
}

// TraceQueryStart implements pgx.QueryTracer.
func (Tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	enter(ctx)
	markTraced(ctx)
	if ctx.Value(commitKey{}) != nil && commits(conn, data.SQL) {
		markCommit(ctx)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	leave(ctx)
}

// TraceBatchStart implements pgx.BatchTracer: a batch outside a
// transaction is one implicit transaction, committed at its end.
func (Tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	enter(ctx)
	markTraced(ctx)
	if ctx.Value(commitKey{}) == nil || data.Batch == nil {
		return ctx
	}
	for _, q := range data.Batch.QueuedQueries {
		if commits(conn, q.SQL) {
			markCommit(ctx)
			break
		}
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (Tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	leave(ctx)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (Tracer) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	enter(ctx)
	markTraced(ctx)
	if ctx.Value(commitKey{}) != nil && conn.PgConn().TxStatus() == 'I' {
		markCommit(ctx)
	}
	return ctx
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	leave(ctx)
}

func enter(ctx context.Context) {
	if b := budgetFrom(ctx); b != nil {
		b.enter()
	}
}

func leave(ctx context.Context) {
	if b := budgetFrom(ctx); b != nil {
		b.leave()
	}
}

// commits reports whether sending sql on conn may commit: it is COMMIT
// (what pgx's Tx.Commit sends), or it runs outside a transaction and is
// neither a plain SELECT nor the BEGIN that opens one.
func commits(conn *pgx.Conn, sql string) bool {
	word := firstWord(sql)
	if strings.EqualFold(word, "commit") || strings.EqualFold(word, "end") {
		return true
	}
	if conn.PgConn().TxStatus() != 'I' {
		return false
	}
	switch strings.ToLower(word) {
	case "select", "begin", "start", "show", "listen", "unlisten", "rollback", "abort":
		return false
	}
	return true
}

// firstWord is sql's first keyword, after blanks and comments (sqlc
// starts each query with a "-- name: …" line).
func firstWord(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n(")
		switch {
		case strings.HasPrefix(sql, "--"):
			_, rest, ok := strings.Cut(sql, "\n")
			if !ok {
				return ""
			}
			sql = rest
		case strings.HasPrefix(sql, "/*"):
			_, rest, ok := strings.Cut(sql, "*/")
			if !ok {
				return ""
			}
			sql = rest
		default:
			end := strings.IndexAny(sql, " \t\r\n(;")
			if end < 0 {
				return sql
			}
			return sql[:end]
		}
	}
}
