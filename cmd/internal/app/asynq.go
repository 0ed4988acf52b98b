package app

import (
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/uumhq/uum/config"
)

// AsynqRedis makes asynq's Redis clients from the options every other
// client of the process is made from, so the ACL user name, database and
// URL options of UUM_REDIS_URL reach asynq too (asynq's own URL parser
// drops some). With Cluster set it makes cluster clients: what
// asynq.RedisClusterClientOpt does, with every option of the cluster URL
// rather than the eight that type carries. Each client is new: asynq
// closes the ones it makes.
type AsynqRedis struct {
	Options *redis.Options
	Cluster *redis.ClusterOptions
}

var _ asynq.RedisConnOpt = AsynqRedis{}

// newAsynqRedis parses cfg's URL as one server's or a cluster's.
func newAsynqRedis(cfg config.Redis) (a AsynqRedis, err error) {
	if cfg.Cluster {
		a.Cluster, err = cfg.ClusterOptions()
	} else {
		a.Options, err = cfg.Options()
	}
	return a, err
}

// MakeRedisClient implements asynq.RedisConnOpt.
func (a AsynqRedis) MakeRedisClient() any {
	if a.Cluster != nil {
		opt := *a.Cluster
		return redis.NewClusterClient(&opt)
	}
	opt := *a.Options
	return redis.NewClient(&opt)
}
