package processor_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/internal/testkit/redistest"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// TestRedisCrashRestartsLoseNothing kills a redis-server that keeps every
// acknowledged write (appendfsync always) with SIGKILL and restarts it on
// the same port and folder, again and again, while two drainers with a
// one-second lease work through acknowledged pushes, through a proxy that
// loses 3 % of replies. Every pushed pair
// must end up in Postgres and the buffer must end empty: a trim resent
// after Redis had run it, a lease that expired while Redis was down, a
// cursor restored from disk - none may remove an entry that was not
// committed.
func TestRedisCrashRestartsLoseNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts a redis-server for several seconds")
	}
	srv := redistest.StartDurable(t)
	pool, _ := dbtest.Schema(t)
	st := store.New(pool)
	ctx := context.Background()
	const prefix = "crash:"
	// Drainers reach Redis through a proxy that also loses replies at
	// random, so resent commands are frequent, not a rare crash timing.
	cutter := redistest.CutReplies(t, srv.Options().Addr, 0.03)
	client := func(addr string) *redis.Client {
		opt := srv.Options()
		opt.Addr = addr
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = time.Second, time.Second, time.Second
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}

	names := []string{"a", "b", "c", "d", "e"}
	var all []uum.Pair
	for _, u := range users(800) {
		for _, n := range names {
			all = append(all, uum.Pair{UserID: u, Name: n})
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	producer := buffer.New(client(srv.Options().Addr), prefix, 0)
	for chunk := range slices.Chunk(all, 100) {
		entries := make([][]byte, len(chunk))
		for i, p := range chunk {
			entries[i] = uum.Event{UserID: p.UserID, Name: p.Name}.MarshalWire(time.Now())
		}
		require.NoError(t, producer.Push(ctx, entries), "every push is acknowledged before the crashes begin")
	}

	cfg := defaultConfig()
	cfg.BatchSize, cfg.MaxIterations, cfg.LeaseTTL = 50, 20, time.Second
	var chaosDone atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		rdb := client(cutter.Addr())
		buf := buffer.New(rdb, prefix, 0)
		d := processor.NewDrainer(cfg, buf, seencache.New(rdb, prefix, time.Hour, st), st, nil, slog.New(slog.DiscardHandler))
		wg.Go(func() {
			for {
				_, _ = d.Drain(ctx) // failures while Redis is down are expected; the next run retries
				if chaosDone.Load() {
					if n, err := buf.Len(ctx); err == nil && n == 0 {
						return
					}
				}
				// Pacing, not a wait for a condition: a run against a dead
				// Redis fails at once.
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
		})
	}

	for range 12 {
		time.Sleep(time.Duration(150+rand.IntN(450)) * time.Millisecond)
		srv.Kill()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		require.NoError(t, srv.Start())
	}
	chaosDone.Store(true)
	wg.Wait()

	var rows int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM unique_user_events`).Scan(&rows))
	require.Equal(t, int64(len(all)), rows, "every acknowledged pair is committed")
	counts, err := st.UniqueCounts(ctx, "")
	require.NoError(t, err)
	for _, c := range counts {
		require.Equal(t, int64(800), c.UniqueUsers, c.EventName)
	}
	n, err := producer.Len(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
