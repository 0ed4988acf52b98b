package processor

import (
	"context"
	"encoding/hex"
	"log/slog"
	"slices"
	"time"

	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/store"
)

// Statsd metrics of the event counters.
const (
	MetricCounterUpdates   = "uum.counters.update_success_total"
	MetricDuplicateDropped = "uum.counters.duplicate_event_dropped_total"
	MetricProjectionLag    = "uum.counters.projection_lag_seconds"
	MetricLateEvents       = "uum.counters.late_events"
	MetricTooLateEvents    = "uum.counters.too_late_events"
	// MetricTransitionIgnored counts steps of transition-safe counters
	// that asked for the state their entity was already in.
	MetricTransitionIgnored = "uum.counters.transition_ignored_total"
)

// DefaultWindowRetention is how long minute buckets are kept when
// WithCounters is given no retention.
const DefaultWindowRetention = 168 * time.Hour

// WithCounters makes the drain project fresh tracked events onto the
// counters of set, in the batch's transaction. Events older than
// retention add no minute bucket. Without it, tracked events are still
// registered and their duplicates audited; nothing is counted.
func WithCounters(set *rules.Set, retention time.Duration) Option {
	if retention <= 0 {
		retention = DefaultWindowRetention
	}
	return func(d *Drainer) { d.counters, d.retention, d.fingerprint = set, retention, set.Fingerprint() }
}

// counted is what a batch's projection did, for metrics and logs.
type counted struct {
	steps   map[string]int64 // applied ±1 steps per counter
	ignored map[string]int64 // transition-safe steps that changed no state
	late    map[string]int64 // events older than the window, per window counter
	tooLate int64            // events older than retention: no bucket
	oldest  time.Time        // oldest occurred_at applied
	// unmatched are the fresh events no counter counts, per type.
	unmatched map[string]int64
}

// merge adds o's figures, from another part of the same batch.
func (c *counted) merge(o counted) {
	for k, n := range o.steps {
		if c.steps == nil {
			c.steps = map[string]int64{}
		}
		c.steps[k] += n
	}
	for k, n := range o.ignored {
		if c.ignored == nil {
			c.ignored = map[string]int64{}
		}
		c.ignored[k] += n
	}
	for k, n := range o.late {
		if c.late == nil {
			c.late = map[string]int64{}
		}
		c.late[k] += n
	}
	for k, n := range o.unmatched {
		if c.unmatched == nil {
			c.unmatched = map[string]int64{}
		}
		c.unmatched[k] += n
	}
	c.tooLate += o.tooLate
	if c.oldest.IsZero() || (!o.oldest.IsZero() && o.oldest.Before(c.oldest)) {
		c.oldest = o.oldest
	}
}

// trackedWrites returns the tracked events with the tag of their entry.
func (b *batch) trackedWrites() []store.TrackedWrite {
	if len(b.tracked) == 0 {
		return nil
	}
	out := make([]store.TrackedWrite, len(b.tracked))
	for i, t := range b.tracked {
		out[i] = store.TrackedWrite{Event: t.TrackedEvent, Entry: entryTag([]byte(b.raw[t.index]), b.at.Add(t.index))}
	}
	return out
}

// projection is what a batch's fresh tracked events change: per-key sums
// of the persistent counters' steps in event order (so the floor is
// applied in order) and per-(counter, scope, minute) bucket counts, each
// written once. The steps of transition-safe counters wait in
// transitions, with their entities, until the commit has locked those
// entities' states (see settle).
type projection struct {
	counters    []store.CounterDelta
	buckets     []store.BucketDelta
	transitions transitions
}

// project computes the projection of the tracked events of b that the
// registry found fresh (fresh[i] for b.tracked[i]) and records in
// b.counted what it counted.
func (d *Drainer) project(b *batch, fresh []bool, now time.Time) projection {
	c := counted{steps: map[string]int64{}, ignored: map[string]int64{}, late: map[string]int64{}}
	var (
		sums   keySums
		p      projection
		border []store.BucketDelta
	)
	buckets := map[store.BucketDelta]int64{} // Count zero in the key
	horizon := now.Add(-d.retention)
	for i, t := range b.tracked {
		if !fresh[i] {
			continue
		}
		e := t.TrackedEvent
		if !d.counters.Counts(e.Type) {
			if c.unmatched == nil {
				c.unmatched = map[string]int64{}
			}
			c.unmatched[e.Type]++
			continue
		}
		if c.oldest.IsZero() || e.OccurredAt.Before(c.oldest) {
			c.oldest = e.OccurredAt
		}
		for _, s := range d.counters.Steps(e) {
			if s.Counter.TransitionSafe {
				p.transitions.add(s)
				continue
			}
			sums.add(s, s.Delta)
			c.steps[s.Counter.Name]++
		}
		for _, w := range d.counters.Windows(e) {
			if e.OccurredAt.Before(horizon) {
				c.tooLate++
				continue
			}
			if e.OccurredAt.Before(now.Add(-w.Window)) {
				c.late[w.Name]++
			}
			minute := e.OccurredAt.Unix() / 60 // occurred_at is never before 1970
			scopes := []string{""}
			if e.OrgID != "" {
				scopes = append(scopes, e.OrgID)
			}
			for _, scope := range scopes {
				k := store.BucketDelta{Counter: w.Name, Scope: scope, Minute: minute}
				if _, ok := buckets[k]; !ok {
					border = append(border, k)
				}
				buckets[k]++
			}
		}
	}
	p.counters = sums.deltas()
	for _, k := range border {
		k.Count = buckets[k]
		p.buckets = append(p.buckets, k)
	}
	b.counted = c
	return p
}

// empty reports whether the projection writes nothing.
func (p *projection) empty() bool {
	return len(p.counters) == 0 && len(p.buckets) == 0 && len(p.transitions.entities) == 0
}

// keySums sums a batch's steps per persistent counter key, in event
// order, for one upsert per key.
type keySums struct {
	sums  map[ckey]*rules.Sum
	rows  map[ckey]*store.CounterDelta
	order []ckey
}

type ckey struct {
	counter string
	hash    [16]byte
}

// add applies delta, the effect of step s, to its key.
func (k *keySums) add(s rules.Step, delta int64) {
	key := ckey{s.Counter.Name, s.Key.Hash}
	if k.sums[key] == nil {
		if k.sums == nil {
			k.sums, k.rows = map[ckey]*rules.Sum{}, map[ckey]*store.CounterDelta{}
		}
		k.sums[key] = &rules.Sum{}
		k.rows[key] = &store.CounterDelta{Counter: s.Counter.Name, Key: s.Key.Hash[:], Dimensions: s.Key.Canonical, Floor: s.Counter.FloorAtZero}
		k.order = append(k.order, key)
	}
	k.sums[key].Add(delta)
}

// deltas returns one delta per key, first step first.
func (k *keySums) deltas() []store.CounterDelta {
	if len(k.order) == 0 {
		return nil
	}
	out := make([]store.CounterDelta, 0, len(k.order))
	for _, key := range k.order {
		d := *k.rows[key]
		d.Total, d.Lift = k.sums[key].Total, k.sums[key].Lift()
		out = append(out, d)
	}
	return out
}

// transitions are a batch's steps of transition-safe counters, in event
// order, and the entities they touch, each once. Their effect waits for
// the entities' states, which the commit locks and loads in the
// transaction.
type transitions struct {
	steps    []rules.Step
	at       []int // index into entities of each step
	index    map[entityID]int
	entities []store.EntityState
}

type entityID struct {
	counter     string
	key, entity [16]byte
}

func (t *transitions) add(s rules.Step) {
	id := entityID{s.Counter.Name, s.Key.Hash, s.Entity.Hash}
	i, ok := t.index[id]
	if !ok {
		if t.index == nil {
			t.index = map[entityID]int{}
		}
		i = len(t.entities)
		t.index[id] = i
		t.entities = append(t.entities, store.EntityState{Counter: s.Counter.Name, Key: s.Key.Hash[:], Entity: s.Entity.Hash[:], EntityJSON: s.Entity.Canonical})
	}
	t.steps = append(t.steps, s)
	t.at = append(t.at, i)
}

// settle applies the steps in event order to the entities' states before
// the batch (active[i] is the state of entities[i], as locked), sums the
// steps that changed a state per key (with the floor, like raw steps),
// and counts into c what it applied and ignored. It returns the
// transition-safe counters' deltas and the entities' states after the
// batch.
func (t *transitions) settle(active []bool, c *counted) ([]store.CounterDelta, []store.EntityState) {
	on := slices.Clone(active)
	var sums keySums
	for i, s := range t.steps {
		delta := s.Settle(&on[t.at[i]])
		if delta == 0 {
			c.ignored[s.Counter.Name]++
			continue
		}
		sums.add(s, delta)
		c.steps[s.Counter.Name]++
	}
	after := slices.Clone(t.entities)
	for i := range after {
		after[i].Active = on[i]
	}
	return sums.deltas(), after
}

// reportCounted emits the counters' metrics and logs the duplicates of a
// committed batch.
func (d *Drainer) reportCounted(ctx context.Context, b *batch, now time.Time) {
	c := b.counted
	for name, n := range c.steps {
		_ = d.stats.Count(MetricCounterUpdates, n, []string{"counter:" + name}, 1)
	}
	for name, n := range c.ignored {
		_ = d.stats.Count(MetricTransitionIgnored, n, []string{"counter:" + name}, 1)
	}
	for name, n := range c.late {
		_ = d.stats.Count(MetricLateEvents, n, []string{"counter:" + name}, 1)
	}
	if c.tooLate > 0 {
		_ = d.stats.Count(MetricTooLateEvents, c.tooLate, nil, 1)
	}
	if !c.oldest.IsZero() {
		_ = d.stats.Gauge(MetricProjectionLag, now.Sub(c.oldest).Seconds(), nil, 1)
	}
	d.warnUnmatched(ctx, c)
	if n := len(b.result.Duplicates); n > 0 {
		_ = d.stats.Count(MetricDuplicateDropped, int64(n), nil, 1)
	}
	for _, dup := range b.result.Duplicates {
		e := b.tracked[dup.Index].TrackedEvent
		steps := d.counters.Steps(e)
		if len(steps) == 0 {
			d.logger.DebugContext(ctx, "duplicate event dropped", "eventId", e.ID, "type", e.Type,
				"first_seen_at", dup.FirstSeenAt, "result", "DROPPED_DUPLICATE")
		}
		for _, s := range steps {
			d.logger.DebugContext(ctx, "duplicate event dropped", "counterName", s.Counter.Name,
				"dimensionKey", hex.EncodeToString(s.Key.Hash[:]), "eventId", e.ID, "op", opName(s.Delta),
				"first_seen_at", dup.FirstSeenAt, "result", "DROPPED_DUPLICATE")
		}
	}
}

func opName(delta int64) string {
	if delta < 0 {
		return "DEC"
	}
	return "INC"
}

// TaskPruneBuckets is the asynq task type of the hourly deletion of minute
// buckets older than the window retention.
const TaskPruneBuckets = "uum:prune_buckets"

// BucketPruner deletes minute buckets; *store.Store satisfies it.
type BucketPruner interface {
	DeleteBucketsBefore(ctx context.Context, minute int64) (int64, error)
}

// PruneBuckets deletes the minute buckets older than retention at now.
func PruneBuckets(ctx context.Context, st BucketPruner, retention time.Duration, now time.Time, logger *slog.Logger) error {
	n, err := st.DeleteBucketsBefore(ctx, now.Add(-retention).Unix()/60)
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "old window buckets deleted", "deleted", n, "retention", retention.String())
	return nil
}
