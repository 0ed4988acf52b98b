package config

import "time"

// Database configures the Postgres that stores unique events.
type Database struct {
	// URL is a postgres:// or postgresql:// connection URL.
	URL string `env:"UUM_DATABASE_URL" envDefault:"postgres://127.0.0.1:5432/uum?sslmode=disable" desc:"Postgres URL (postgres:// or postgresql://)."`
	// Schema holds every uum table and uum's migration history; it is
	// created if missing. Empty means the first schema of the URL's
	// search_path, or "public" without one (store.UseSchema).
	Schema string `env:"UUM_DATABASE_SCHEMA" desc:"Postgres schema of uum's tables and migration history, created if missing; empty means the first schema of the search_path in UUM_DATABASE_URL, else public."`
	// ReadURL, when set, is a read replica of URL for the read endpoints
	// and EventLogged.
	ReadURL string `env:"UUM_DATABASE_READ_URL" desc:"Postgres URL of a read replica for the read endpoints and EventLogged; empty reads from UUM_DATABASE_URL."`
	// ReadTimeout bounds each read's attempt on the replica (and the
	// replica's connection attempts); past it the read goes to the
	// primary and the replica is marked down. Zero means 2s.
	ReadTimeout time.Duration `env:"UUM_DATABASE_READ_TIMEOUT" envDefault:"2s" desc:"Time limit of each read's attempt on the replica of UUM_DATABASE_READ_URL; past it the read goes to the primary and the replica is marked down for 10s."`
	// Partitions is the number of hash partitions (by user_id) of the
	// pair table a new install creates; an existing table keeps its own.
	Partitions int `env:"UUM_DATABASE_PARTITIONS" envDefault:"16" desc:"Hash partitions (by user_id) of the pair table that a new install creates (1-1024); an existing table keeps its layout and count."`
}
