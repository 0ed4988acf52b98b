package processor

import (
	"context"
	"log/slog"
	"time"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// WithReportZone files each user event's activity under its calendar day
// in zone (UUM_REPORT_TIMEZONE); without it, UTC days.
func WithReportZone(zone *time.Location) Option { return func(d *Drainer) { d.zone = zone } }

// activity returns what b's user events say about active users: each
// (user, event, day) once, the day being the calendar day in zone of the
// time the producer buffered the entry, or of now for an entry that does
// not say (version 1) or says a time after now (a producer's clock ahead
// cannot mark a user active on a day to come). Every event counts, not
// only those whose pair is new: a returning user's first event of a day
// is what puts them in the day's set. Tracked events are not user
// activity: they carry entities, not a user's visit.
func (d *Drainer) activity(b *batch, now time.Time) []store.Activity {
	if d.noActivity {
		return nil
	}
	zone := d.zone
	if zone == nil {
		zone = time.UTC
	}
	type key struct {
		pair uum.Pair
		day  int64
	}
	seen := make(map[key]struct{}, len(b.events))
	out := make([]store.Activity, 0, len(b.events))
	for i, ev := range b.events {
		at := b.bufferedAt[b.index[i]]
		if at.IsZero() || at.After(now) {
			at = now
		}
		y, m, d := at.In(zone).Date()
		day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		k := key{ev.Pair(), day.Unix()}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, store.Activity{User: ev.UserID, Name: ev.Name, Day: day})
	}
	return out
}

// TaskCompactActiveUsers is the asynq task type of the compaction of the
// active-user sets: the delta rows drains append, folded into the sets'
// rows (store.CompactActiveUsers). Reads union both, so it only bounds
// their number: storage (a batch's delta costs ~3 B a user against ~1 B
// in a compacted broad set) and the rows a read decodes.
const TaskCompactActiveUsers = "uum:compact_active_users"

// CompactEvery is how often the service compacts the active-user sets.
const CompactEvery = 30 * time.Second

// compactSets is how many sets one compaction run folds at most; the
// rest wait for the next run.
const compactSets = 10_000

// storeUnions is how many unions of closed weeks and months one run
// writes at most: a broad month reads thirty days of ~1.25 MB, so a
// year of history is written over a few runs.
const storeUnions = 50

// closedAfter is how long after its end a day is taken as closed for the
// stored unions, as the readers take it for their cache: the drain files
// an event under the day it was buffered, so a day changes only while
// its last entries are drained. A later change (a backfill, a replay)
// deletes the union it falls into, to be written again.
const closedAfter = time.Hour

// ActiveUserCompactor folds the active-user delta rows into the sets and
// stores the unions of closed weeks and months; *store.Store satisfies
// it.
type ActiveUserCompactor interface {
	CompactActiveUsers(ctx context.Context, limit int) (int, error)
	StoreActiveUnions(ctx context.Context, closed time.Time, limit int) (int, error)
}

// CompactActiveUsers runs one compaction of the active-user sets, then
// stores the unions of the weeks and months closed at now in zone (the
// report zone) that have none.
func CompactActiveUsers(ctx context.Context, st ActiveUserCompactor, zone *time.Location, now time.Time, logger *slog.Logger) error {
	n, err := st.CompactActiveUsers(ctx, compactSets)
	if err != nil {
		return err
	}
	if n > 0 {
		logger.DebugContext(ctx, "active user sets compacted", "sets", n)
	}
	y, m, d := now.Add(-closedAfter).In(zone).Date()
	u, err := st.StoreActiveUnions(ctx, time.Date(y, m, d, 0, 0, 0, 0, time.UTC), storeUnions)
	if err != nil {
		return err
	}
	if u > 0 {
		logger.DebugContext(ctx, "active user unions stored", "unions", u)
	}
	return nil
}
