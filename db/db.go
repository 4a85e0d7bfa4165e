// Package db embeds Sluice's schema migrations (goose format), so the binary
// carries them and sqlc reads the same files as the schema.
package db

import "embed"

// Migrations holds migrations/*.sql.
//
//go:embed migrations/*.sql
var Migrations embed.FS
