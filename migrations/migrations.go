// Package migrations embeds the SQL schema migrations and applies them
// with pressly/goose (Apply). It is apart from store so that what only
// reads and writes rows, the producer library among them, links neither
// goose nor the migration files: only the binaries that migrate at start
// (and the tests) import it.
package migrations

import "embed"

// FS holds the numbered goose migration files.
//
//go:embed *.sql
var FS embed.FS
