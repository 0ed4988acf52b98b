package app

import (
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// AsynqRedis makes asynq's Redis clients from the options every other
// client of the process is made from, so the ACL user name, database and
// URL options of UUM_REDIS_URL reach asynq too (asynq's own URL parser
// drops some). Each client is new: asynq closes the ones it makes.
type AsynqRedis struct{ Options *redis.Options }

var _ asynq.RedisConnOpt = AsynqRedis{}

// MakeRedisClient implements asynq.RedisConnOpt.
func (a AsynqRedis) MakeRedisClient() any {
	opt := *a.Options
	return redis.NewClient(&opt)
}
