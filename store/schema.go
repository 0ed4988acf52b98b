package store

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// UseSchema makes schema the search_path of cfg's connections and returns
// it. An empty schema means the first schema of cfg's search_path (from
// the URL), or "public" without one; naming just one schema keeps a
// "$user" schema, which Postgres searches first by default, from taking
// uum's tables.
func UseSchema(cfg *pgx.ConnConfig, schema string) string {
	if schema == "" {
		schema = SchemaOf(cfg)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	return schema
}

// SchemaOf returns the first schema of cfg's search_path, or "public".
func SchemaOf(cfg *pgx.ConnConfig) string {
	first, _, _ := strings.Cut(cfg.RuntimeParams["search_path"], ",")
	if s := strings.Trim(strings.TrimSpace(first), `"`); s != "" {
		return s
	}
	return "public"
}
