package rediskey

import (
	"strconv"
	"time"
)

// The pipeline metrics keys start with <prefix>metrics:. The totals and
// the rate of a shard carry the shard's {buffer:N} tag: the fenced trim
// updates them in the same script that trims the list, on one cluster
// slot, so each trimmed entry is counted exactly once.

// MetricsTotals returns the hash of a shard's pipeline totals: total,
// delivered, failed, last_processed_at and last_failure_at (unix ms).
func MetricsTotals(prefix string, shard int) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:totals"
}

// MetricsRate returns the hash of a shard's entries trimmed per unix
// second, pruned to the last two minutes.
func MetricsRate(prefix string, shard int) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:rate"
}

// MetricsShardCounts returns the set of the UUM_BUFFER_SHARDS values the
// pipeline metrics were read with: its largest is how many shards they
// add up, the shards left over after lowering the count included.
func MetricsShardCounts(prefix string) string {
	return prefix + "metrics:shard_counts"
}

// MetricsLatency returns the hash of one minute's buffered-to-committed
// latency sketch: DDSketch bin index to count ("z" for zero), merged by
// HINCRBY across drainers, and a "flush:<id>" field per flush applied.
func MetricsLatency(prefix string, minute int64) string {
	return prefix + "metrics:latency:" + strconv.FormatInt(minute, 10)
}

// MetricsLastRun returns the string key holding the JSON summary of the
// last drain run of a shard (pipemetrics.Run), overwritten by each run.
func MetricsLastRun(prefix string, shard int) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:last_run"
}

// MetricsLastNonEmptyRun returns the string key holding the JSON summary
// of the last drain run of a shard that drained at least one entry.
func MetricsLastNonEmptyRun(prefix string, shard int) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:last_nonempty_run"
}

// MetricsHistory returns the sorted set of a shard's per-minute pipeline
// points (pipemetrics.Point as JSON, scored by epoch minute), pruned to
// the last hour.
func MetricsHistory(prefix string, shard int) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:history"
}

// MetricsReconciliation returns the string key holding the JSON summary of
// the last reconciliation of the unique-user totals.
func MetricsReconciliation(prefix string) string {
	return prefix + "metrics:last_reconciliation"
}

// MetricsLatencyHistogram returns the hash of the buffered-to-committed
// latency histogram since the start, never expired: per bucket
// ("b<index>", "inf") the number of latencies in it, "sum_us" their sum in
// microseconds. Its {latency_hist} tag puts it on the slot of its flush
// markers.
func MetricsLatencyHistogram(prefix string) string {
	return prefix + "metrics:{latency_hist}:buckets"
}

// MetricsLatencyHistogramFlush returns the marker of one flush applied to
// the latency histogram, which expires once no resend can come.
func MetricsLatencyHistogramFlush(prefix, id string) string {
	return prefix + "metrics:{latency_hist}:flush:" + id
}

// The long history (pipemetrics.Period) keeps one hash per minute of the
// last day and per hour of the last 90 days, each expiring once it is out
// of range, so its size is bounded by the clock whoever writes it. A
// period is a resolution byte, 'm' (the epoch minute) or 'h' (the epoch
// hour), and its number.

// MetricsPeriodCounts returns the hash of a shard's counts in one period:
// entries drained, delivered and dead-lettered (added by the fenced trim,
// which carries the shard's {buffer:N} tag), the runs that finished in it
// and their durations.
func MetricsPeriodCounts(prefix string, shard int, res byte, n int64) string {
	return prefix + "metrics:{buffer:" + strconv.Itoa(shard) + "}:period:" + string(res) + ":" + strconv.FormatInt(n, 10)
}

// MetricsPeriodGauges returns the hash of the pipeline's sampled gauges in
// one period: the largest buffer depth and lag sampled, and the latency
// percentiles. The {history} tag puts every period on one slot, so the
// sampler updates a minute and its hour in one script.
func MetricsPeriodGauges(prefix string, res byte, n int64) string {
	return prefix + "metrics:{history}:" + string(res) + ":" + strconv.FormatInt(n, 10)
}

// Periods kept: a minute's hashes live a day and an hour's 90 days, each
// a little longer so that the oldest period of a range is still whole
// when it is read.
const (
	MinutePeriodTTL = 24*time.Hour + 5*time.Minute
	HourPeriodTTL   = 90*24*time.Hour + 2*time.Hour
)

// PeriodKeys returns the epoch minute and epoch hour of t: the numbers of
// its 'm' and 'h' periods.
func PeriodKeys(t time.Time) (minute, hour int64) {
	return t.Unix() / 60, t.Unix() / 3600
}
