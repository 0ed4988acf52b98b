package rediskey_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/rediskey"
)

func TestKeys(t *testing.T) {
	t.Parallel()

	t.Run("BufferAndLeaseShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:{buffer:3}:pending", rediskey.Buffer("p:", 3))
		require.Equal(t, "p:{buffer:3}:lease", rediskey.Lease("p:", 3))
		require.Equal(t, "p:{buffer:3}:cursor", rediskey.Cursor("p:", 3))
		require.Equal(t, "p:metrics:{buffer:3}:last_run", rediskey.MetricsLastRun("p:", 3))
		require.Equal(t, "p:metrics:{buffer:3}:period:m:29000000", rediskey.MetricsPeriodCounts("p:", 3, 'm', 29000000))
	})

	t.Run("PeriodGaugesShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:metrics:{history}:m:29000000", rediskey.MetricsPeriodGauges("p:", 'm', 29000000))
		require.Equal(t, "p:metrics:{history}:h:483333", rediskey.MetricsPeriodGauges("p:", 'h', 483333))
	})

	t.Run("LatencyHistogramAndFlushMarkersShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:metrics:{latency_hist}:buckets", rediskey.MetricsLatencyHistogram("p:"))
		require.Equal(t, "p:metrics:{latency_hist}:flush:ab12", rediskey.MetricsLatencyHistogramFlush("p:", "ab12"))
	})

	t.Run("SeenKeyNamesGenerationAndBucket", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:s:{0a1b2c3d.0:25}:12:345", rediskey.Seen("p:", "0a1b2c3d.0", 12, 345, 64))
	})

	t.Run("SeenGenerationsAndGroupShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:s:{x:7}:12:7", rediskey.Seen("p:", "x", 12, 7, 64))
		require.Equal(t, "p:s:{x:7}:11:7", rediskey.Seen("p:", "x", 11, 7, 64))
		require.Equal(t, "p:s:{x:7}:11:71", rediskey.Seen("p:", "x", 11, 71, 64))
	})
}
