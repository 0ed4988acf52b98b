package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/store"
)

// Shape of the benchmark data: what a week of 1M tracked events over 100
// orgs leaves behind.
const (
	benchOrgs     = 100
	benchMinutes  = 168 * 60 // UUM_WINDOW_RETENTION's default: every bucket still kept
	benchAccounts = 100_000  // keys of the persistent counter
	benchPerKey   = 10       // events per key: 1M in all
)

// BenchmarkCounterReads measures GET /v1/windows/{name} and
// GET /v1/counters/{name}?dim... through the HTTP handler (in process,
// token check and JSON included) against real Postgres holding what about
// 1M events over 100 orgs produce:
//
//   - received_1h: one bucket per org per minute of the last 168 h with
//     count 1 (1,008,000 events), plus the platform-wide bucket of each
//     minute (count 100): 1,018,080 rows, inserted in time order as drains
//     write them. A read sums 60 of them by a primary-key range scan.
//   - connections (dimensions masterAccountId, region): 100,000 keys of
//     value 10 (1,000,000 events), keyed as the drain keys them.
//
// Reads cycle over the orgs (every 101st platform-wide) and over the
// accounts. It reports the p50 and p99 latency of a request in ms.
func BenchmarkCounterReads(b *testing.B) {
	h := populateReads(b)
	b.Run("Window", func(b *testing.B) {
		measureReads(b, h, func(i int) string {
			if i%(benchOrgs+1) == benchOrgs {
				return "/v1/windows/received_1h"
			}
			return fmt.Sprintf("/v1/windows/received_1h?org_id=org-%d", i%(benchOrgs+1))
		})
	})
	b.Run("Counter", func(b *testing.B) {
		measureReads(b, h, func(i int) string {
			a := (i * 7919) % benchAccounts // spread over the table
			return fmt.Sprintf("/v1/counters/connections?dim.masterAccountId=acct-%d&dim.region=%s", a, benchRegions[a%len(benchRegions)])
		})
	})
}

var benchRegions = []string{"eu", "us", "ap", "sa"}

// populateReads fills a fresh schema with the benchmark's rows and
// returns the read handler over it, having checked that reads hit them.
func populateReads(b *testing.B) http.Handler {
	b.Helper()
	ctx := context.Background()
	pool, _ := dbtest.Schema(b)
	now := time.Now().Unix() / 60
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO window_buckets (counter_name, scope, minute, count)
		  SELECT 'received_1h', s.scope, m, CASE WHEN s.scope = '' THEN $3 ELSE 1 END
		  FROM generate_series($1::bigint - $2 + 1, $1::bigint) m,
		       (SELECT 'org-' || o AS scope FROM generate_series(0, $3 - 1) o UNION ALL SELECT '') s
		  ORDER BY m, s.scope`, []any{now, benchMinutes, benchOrgs}},
		{`INSERT INTO counters (counter_name, dimension_key, dimensions_json, value)
		  SELECT 'connections', substring(sha256(convert_to(d, 'UTF8')) FROM 1 FOR 16), d::jsonb, $2
		  FROM (SELECT '{"masterAccountId":"acct-' || i || '","region":"' || ($3::text[])[1 + i % 4] || '"}' AS d
		        FROM generate_series(0, $1 - 1) i) k`, []any{benchAccounts, benchPerKey, benchRegions}},
		{`INSERT INTO counter_commits (committed_at) VALUES (now())`, nil},
	} {
		_, err := pool.Exec(ctx, q.sql, q.args...)
		require.NoError(b, err)
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE window_buckets, counters`)
	require.NoError(b, err)

	h := readHandler(parseCounters(b), store.New(pool))
	var w windowBody
	requireJSON(b, call(h, http.MethodGet, "/v1/windows/received_1h", readToken, ""), http.StatusOK, &w)
	require.EqualValues(b, 60*benchOrgs, w.Value)
	requireJSON(b, call(h, http.MethodGet, "/v1/windows/received_1h?org_id=org-42", readToken, ""), http.StatusOK, &w)
	require.EqualValues(b, 60, w.Value)
	var c counterBody
	requireJSON(b, call(h, http.MethodGet, "/v1/counters/connections?dim.masterAccountId=acct-6&dim.region=ap", readToken, ""), http.StatusOK, &c)
	require.EqualValues(b, benchPerKey, c.Value, "the SQL keys match rules.KeyOf")
	return h
}

// measureReads serves b.N requests to path(i) one after the other and
// reports their p50 and p99 latency.
func measureReads(b *testing.B, h http.Handler, path func(i int) string) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		r := newRequest(http.MethodGet, path(i), readToken, "")
		start := time.Now()
		rec := serve(h, r)
		lat = append(lat, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", r.URL, rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
