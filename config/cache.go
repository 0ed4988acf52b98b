package config

import "time"

// Cache configures the Redis cache of (user, event) pairs already counted.
type Cache struct {
	// TTL is how long a pair stays cached.
	TTL time.Duration `env:"UUM_CACHE_TTL" envDefault:"168h" desc:"A cached seen pair is dropped between TTL/2 and TTL after its last use (at least 1s)."`
	// Buckets is how many Redis hashes the cached users are spread over;
	// keep users/Buckets well under Redis's hash-max-listpack-entries (128).
	Buckets int `env:"UUM_CACHE_BUCKETS" envDefault:"16384" desc:"Redis hashes the seen-cache spreads users over (about users/90; changing it empties the cache)."`
}
