package app

import (
	"context"
	"fmt"

	"github.com/DataDog/datadog-go/v5/statsd"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/processor"
)

// Names returns the event-name policy of UUM_EVENT_NAMES and the tracked
// facilities: what the drain, a dead-letter replay and a backfill check
// names with, as the API does.
func (a *App) Names() (uum.NamePolicy, error) {
	cfg := a.Config.Events
	p, err := uum.NewNamePolicy(cfg.Names)
	if err != nil {
		return uum.NamePolicy{}, fmt.Errorf("event names: %w", err)
	}
	return p.WithFacilities(cfg.TrackedFacilityIDs, cfg.FacilityTrackedEvents)
}

// Drainer returns the drainer of both processor (service and -once) and
// uumctl drain, applying names, with every option a drain run has: the
// name cap, the counters, the pipeline metrics, the run record and the
// dead letter of a run that exhausted its retries (recorded by
// HandleError, which only asynq calls). Built in one place so a run is the
// same whoever starts it: the two copies this replaces had drifted apart.
// It refuses to make a drainer whose counters file differs from the one
// the database records, with a *config.Error (processor.CheckCounters).
func (a *App) Drainer(ctx context.Context, names processor.NameChecker) (*processor.Drainer, error) {
	cfg := a.Config
	shard := func(i int, stats statsd.ClientInterface, opts ...processor.Option) *processor.Drainer {
		buf := a.Buffer
		if i != 0 {
			buf = buffer.New(a.Redis, cfg.Redis.KeyPrefix, i)
		}
		return processor.NewDrainer(cfg.Processor, buf, a.Seen, a.Store, stats, a.logger.With("shard", i),
			append([]processor.Option{processor.WithNames(names), processor.WithRunFailures(a.Store),
				processor.WithPipelineMetrics(a.Pipeline, a.Store), processor.WithRunRecorder(a.Pipeline.Runs(i)),
				processor.WithNameLimit(a.Store, cfg.Processor.MaxEventNames),
				processor.WithCounters(a.Counters, cfg.Counters.WindowRetention), processor.WithCountersRecord(a.Store),
				processor.WithReportZone(cfg.Active.Location()), processor.WithPause(a.Pauses)}, opts...)...)
	}
	stats := a.Stats
	if cfg.Redis.BufferShards > 1 {
		stats = processor.ShardStats(a.Stats, 0)
	}
	d := shard(0, stats, processor.WithShards(cfg.Redis.BufferShards, config.MaxBufferShards, cfg.Processor.DrainConcurrency,
		func(i int) *processor.Drainer { return shard(i, processor.ShardStats(a.Stats, i)) },
		func(ctx context.Context, from, to int) ([]int64, error) {
			return buffer.Lens(ctx, a.Redis, cfg.Redis.KeyPrefix, from, to)
		}))
	if err := d.CheckCounters(ctx); err != nil {
		return nil, err
	}
	return d, nil
}
