// Package migrations embeds the SQL schema migrations, applied in order by
// store.Migrate with pressly/goose.
package migrations

import "embed"

// FS holds the numbered goose migration files.
//
//go:embed *.sql
var FS embed.FS
