package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/store"
)

// Statsd metrics of the counters file check.
const (
	// MetricCountersMismatch counts drainers that refused to start
	// (tag at:start) and batches whose tracked events stayed in the
	// buffer (at:commit) because their counters file was missing or
	// differed from the recorded one.
	MetricCountersMismatch = "uum.counters.file_mismatch"
	// MetricUnmatchedEvents counts fresh tracked events whose type no
	// counter has a rule for: registered, counted by none.
	MetricUnmatchedEvents = "uum.counters.unmatched_events"
)

// CountersRecorder records which counter definitions the drains count
// tracked events with; *store.Store satisfies it. RecordedCounters returns
// the record (ok false: none was ever made). AdoptCounters records rec
// unless a record exists, and returns the record in force and whether it
// is rec.
type CountersRecorder interface {
	RecordedCounters(ctx context.Context) (rec store.CountersRecord, ok bool, err error)
	AdoptCounters(ctx context.Context, rec store.CountersRecord) (store.CountersRecord, bool, error)
}

// WithCountersRecord makes CheckCounters compare the drainer's counters
// (WithCounters) with those recorded in r.
func WithCountersRecord(r CountersRecorder) Option { return func(d *Drainer) { d.record = r } }

// RecordedByDrain is the RecordedBy of counters a drainer recorded as the
// first to count with them.
const RecordedByDrain = "first drainer with a counters file"

// CheckCounters is what a drainer checks before its first run: that it
// counts tracked events with the counters the database records. The first
// drainer with a counters file records it; a drainer whose file is missing
// or differs from the recorded one refuses to start, with a
// *config.Error naming UUM_COUNTERS_FILE, rather than counting tracked
// events by other rules or by none: the buffer keeps them until a drainer
// with the recorded file runs, or an operator accepts the new one
// (uumctl counters accept). It logs the counters it loaded. Without
// WithCountersRecord it checks nothing.
func (d *Drainer) CheckCounters(ctx context.Context) error {
	if d.record == nil {
		return nil
	}
	var (
		rec      store.CountersRecord
		recorded bool
		err      error
	)
	if d.counters == nil {
		rec, recorded, err = d.record.RecordedCounters(ctx)
		recorded = recorded && rec.Fingerprint != ""
	} else {
		var adopted bool
		rec, adopted, err = d.record.AdoptCounters(ctx, store.CountersRecord{
			Fingerprint: d.fingerprint, Counters: d.counters.Names(), RecordedBy: RecordedByDrain})
		recorded = true
		if err == nil && adopted {
			d.logger.InfoContext(ctx, "counters recorded: tracked events are counted with this file from now on",
				"file", d.counters.File(), "fingerprint", d.fingerprint)
		}
	}
	if err != nil {
		return fmt.Errorf("check counters: %w", err)
	}
	if !recorded || rec.Fingerprint == d.fingerprint {
		d.logCounters(ctx)
		return nil
	}
	_ = d.stats.Incr(MetricCountersMismatch, []string{"at:start"}, 1) // statsd is best-effort UDP
	_ = d.stats.Flush()
	return &config.Error{Var: "UUM_COUNTERS_FILE", Reason: d.mismatch(rec)}
}

// logCounters logs the counters the drainer counts with: their file,
// fingerprint and number at info, what each one counts at debug (about
// 900 characters for the example file, on every processor -once).
func (d *Drainer) logCounters(ctx context.Context) {
	if d.counters == nil {
		d.logger.InfoContext(ctx, "no counters file (UUM_COUNTERS_FILE): tracked events are registered, counted by no counter")
		return
	}
	d.logger.InfoContext(ctx, "counters loaded", "file", d.counters.File(), "fingerprint", d.fingerprint,
		"counters", len(d.counters.Names()))
	d.logger.DebugContext(ctx, "counters loaded: definitions", "counters", d.counters.Describe())
}

// mismatch says how the drainer's counters differ from rec and what to do.
func (d *Drainer) mismatch(rec store.CountersRecord) string {
	recorded := fmt.Sprintf("%s (%s), recorded %s by %s", rec.Fingerprint, strings.Join(rec.Counters, ", "),
		rec.RecordedAt.UTC().Format(time.RFC3339), rec.RecordedBy)
	held := "tracked events stay in the buffer, counted by nothing, until a drainer has the recorded file"
	switch {
	case d.counters == nil:
		return "is not set, but the drains count tracked events with counters " + recorded + "; " + held +
			`, or "uumctl counters accept" is run without UUM_COUNTERS_FILE to stop counting them on purpose`
	case rec.Fingerprint == "":
		return fmt.Sprintf(`%s (%s) is set, but counting tracked events was switched off on purpose (recorded %s by %s); `+
			`run "uumctl counters accept" with this file to count with it`, d.counters.File(), d.fingerprint,
			rec.RecordedAt.UTC().Format(time.RFC3339), rec.RecordedBy)
	}
	return fmt.Sprintf(`%s has counters %s (%s), but the drains count tracked events with %s; %s, `+
		`or "uumctl counters accept" is run with this file to change the counters on purpose`,
		d.counters.File(), d.fingerprint, strings.Join(d.counters.Names(), ", "), recorded, held)
}

// holdTracked fails a batch whose commit the database refused because the
// recorded counters are not the drainer's (changed since it started): its
// entries, tracked events and all, stay in the buffer.
func (d *Drainer) holdTracked(b *batch, err error) error {
	if !errors.Is(err, store.ErrCountersChanged) {
		return err
	}
	_ = d.stats.Incr(MetricCountersMismatch, []string{"at:commit"}, 1)
	return step("counters", fmt.Errorf("%d tracked events stay in the buffer: %w; restart the drainer with the recorded counters file, or accept this one (uumctl counters accept)",
		len(b.tracked), err))
}

// maxWarnedTypes bounds the event types warnUnmatched remembers: types are
// producer input.
const maxWarnedTypes = 1000

// unmatchedTypes remembers the types of tracked events already warned
// about: each is logged once per process.
type unmatchedTypes struct {
	mu     sync.Mutex
	warned map[string]bool
}

// warnUnmatched counts the batch's fresh tracked events that no counter
// counts, and logs each type the first time: a typo in a producer's
// type is accepted, registered and counts nothing.
func (d *Drainer) warnUnmatched(ctx context.Context, c counted) {
	var total int64
	for t, n := range c.unmatched {
		total += n
		if d.unmatched.first(t) {
			d.logger.WarnContext(ctx, "tracked events of a type no counter counts", "type", t,
				"counters_file", d.counters.File(), "events", n)
		}
	}
	if total > 0 {
		_ = d.stats.Count(MetricUnmatchedEvents, total, nil, 1)
	}
}

// first reports whether t is met for the first time, while fewer than
// maxWarnedTypes are remembered.
func (u *unmatchedTypes) first(t string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.warned[t] || len(u.warned) >= maxWarnedTypes {
		return false
	}
	if u.warned == nil {
		u.warned = map[string]bool{}
	}
	u.warned[t] = true
	return true
}
