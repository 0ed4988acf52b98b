package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxBufferShards is the most shards UUM_BUFFER_SHARDS may name.
const MaxBufferShards = 1024

// Redis configures the Redis that holds the event buffer, the drain lease
// and the seen-pairs cache.
type Redis struct {
	// URL is a redis:// or rediss:// URL with an optional database number.
	URL string `env:"UUM_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0" desc:"Redis URL (redis:// or rediss://, optional database /0-/15); with UUM_REDIS_CLUSTER, a cluster URL: redis://host1:port1?addr=host2:port2&addr=host3:port3."`
	// KeyPrefix starts every Redis key the service uses.
	KeyPrefix string `env:"UUM_KEY_PREFIX" envDefault:"uum:" desc:"Prefix of every Redis key."`
	// BufferShards is how many lists (shards) the buffer is split into;
	// a user's events always go to the same one.
	BufferShards int `env:"UUM_BUFFER_SHARDS" envDefault:"1" desc:"Shards of the event buffer (1-1024): a user's events always go to the same shard, tracked events to shard 0; each shard has its own lease. Lowering it is safe: processors drain the shards beyond it until empty."`
	// Cluster makes URL the address of a Redis Cluster, in go-redis's
	// cluster URL form (redis.ParseClusterURL).
	Cluster bool `env:"UUM_REDIS_CLUSTER" envDefault:"false" keepzero:"true" desc:"true: UUM_REDIS_URL names a Redis Cluster (its nodes as addr= options) and every client, asynq's too, is a cluster client."`
	// PushWaitReplicas is how many replicas must acknowledge each push
	// (LPUSH, then WAIT on the same connection) before it succeeds; 0
	// does not wait.
	PushWaitReplicas int `env:"UUM_PUSH_WAIT_REPLICAS" envDefault:"0" keepzero:"true" desc:"Replicas that must acknowledge every push (LPUSH, then WAIT) before it succeeds, so that it survives a failover to one of them; 0 does not wait. WAIT's timeout is half of what is left of the push's time limit."`
}

// Options parses URL with go-redis's parser, the one every Redis client of
// the service is made from (asynq's too), so the user name, database and
// URL options reach all of them. It also requires a host and a database
// 0-15, and turns on ContextTimeoutEnabled so that context deadlines bound
// every command. Each call returns new Options.
func (r Redis) Options() (*redis.Options, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, errors.New("parse redis url: no host")
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	if opt.DB < 0 || opt.DB > 15 {
		return nil, fmt.Errorf("parse redis url: database %d is not 0-15", opt.DB)
	}
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// ClusterOptions parses URL with go-redis's cluster URL parser, for
// UUM_REDIS_CLUSTER: the first node in the host, the others as addr=
// options. A cluster has only database 0, so any other database in the
// path is an error rather than ignored. ContextTimeoutEnabled is on, as
// for Options.
func (r Redis) ClusterOptions() (*redis.ClusterOptions, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis cluster url: %w", err)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, errors.New("parse redis cluster url: no host")
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" && db != "0" {
		return nil, fmt.Errorf("parse redis cluster url: database %q: a cluster has only database 0", db)
	}
	u.Path = ""
	opt, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("parse redis cluster url: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	// go-redis reloads the slot map on MOVED, not when a master stops
	// answering, and otherwise every minute: a minute of failures after a
	// failover. A reload is one CLUSTER SLOTS, and only of a client in use.
	opt.ClusterStateReloadInterval = ClusterReloadInterval
	return opt, nil
}

// ClusterReloadInterval is how often a cluster client in use re-reads the
// slot map: the longest it keeps sending a slot's commands to a master
// that failed over.
const ClusterReloadInterval = 2 * time.Second

// NewClient returns a new client of URL: a cluster client with Cluster,
// else a client of one server. Every Redis client of the service is made
// here or from the same options (asynq's), so each honours every setting.
// maxRetries, when not 0, replaces the URL's max_retries (-1: never resend
// a command, for pushes whose caller retries).
func (r Redis) NewClient(maxRetries int) (redis.UniversalClient, error) {
	if r.Cluster {
		opt, err := r.ClusterOptions()
		if err != nil {
			return nil, err
		}
		if maxRetries != 0 {
			opt.MaxRetries = maxRetries
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := r.Options()
	if err != nil {
		return nil, err
	}
	if maxRetries != 0 {
		opt.MaxRetries = maxRetries
	}
	return redis.NewClient(opt), nil
}
