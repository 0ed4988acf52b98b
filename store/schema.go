package store

import (
	"strconv"
	"strings"
	"time"

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

// BoundIdleTransactions makes the server end any session of cfg's
// connections that sits idle inside a transaction for longer than d
// (idle_in_transaction_session_timeout), which releases its row locks.
// With d the drain lease's TTL: a drainer frozen mid-commit (SIGSTOP, a
// paused VM) stops renewing its lease, and its transaction ends about
// when the lease does, so the drainer that takes the lease over waits
// for its row locks that long at most, not until its own commit times
// out. The frozen drainer, if it wakes, finds its transaction gone, and
// its fenced trim refuses: nothing is lost or counted twice. No uum
// transaction waits on anything but the database between its
// statements. A d of zero leaves the server's setting.
func BoundIdleTransactions(cfg *pgx.ConnConfig, d time.Duration) {
	if d > 0 {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(d.Milliseconds(), 10)
	}
}
