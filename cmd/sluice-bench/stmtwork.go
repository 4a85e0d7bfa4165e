package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statementWork is the work Postgres did for the statements of a window
// that does not depend on how busy the machine was: the shared buffer
// pages they touched and the WAL they wrote. Where CPU per delivery moves
// with the machine's load, these move only with what the statements do.
type statementWork struct {
	blocks     int64 // shared buffer pages hit or read
	walRecords int64
	walBytes   int64
}

// readStatementWork sums statementWork over this database's statements
// (the benchmark's own aside) and logs the statements that wrote the most
// WAL and touched the most pages, per unit of per.
func readStatementWork(ctx context.Context, db *pgx.Conn, per float64) (statementWork, error) {
	rows, err := db.Query(ctx, `/* bench-drain */
		SELECT query, shared_blks_hit + shared_blks_read, wal_records, wal_bytes::int8
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%bench-drain%' AND query NOT ILIKE '%pg_stat_%'`)
	if err != nil {
		return statementWork{}, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	type stmt struct {
		query string
		work  statementWork
	}
	stmts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stmt, error) {
		var s stmt
		if err := r.Scan(&s.query, &s.work.blocks, &s.work.walRecords, &s.work.walBytes); err != nil {
			return s, fmt.Errorf("scan a statement: %w", err)
		}
		return s, nil
	})
	if err != nil {
		return statementWork{}, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	var sum statementWork
	for _, s := range stmts {
		sum.blocks += s.work.blocks
		sum.walRecords += s.work.walRecords
		sum.walBytes += s.work.walBytes
	}
	top := func(by func(statementWork) int64, unit string) string {
		sorted := append([]stmt(nil), stmts...)
		slices.SortFunc(sorted, func(a, b stmt) int { return cmp.Compare(by(b.work), by(a.work)) })
		var parts []string
		for _, s := range sorted[:min(len(sorted), 8)] {
			parts = append(parts, fmt.Sprintf("`%s` %.1f%s", shortSQL(s.query), float64(by(s.work))/per, unit))
		}
		return strings.Join(parts, "; ")
	}
	logf("  pages/delivery %.1f, by statement: %s", float64(sum.blocks)/per, top(func(w statementWork) int64 { return w.blocks }, ""))
	logf("  WAL/delivery %.0f B in %.1f records, by statement: %s", float64(sum.walBytes)/per, float64(sum.walRecords)/per,
		top(func(w statementWork) int64 { return w.walBytes }, " B"))
	return sum, nil
}
