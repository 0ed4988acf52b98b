package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/internal/testkit/dbtest"
	"github.com/uumhq/uum/migrations"
	"github.com/uumhq/uum/store"
)

// BenchmarkDeadLetterTriage times the console's dead-letter reads over a
// million realistic dead letters (UUM_BENCH_DLQ_ROWS to change it),
// loaded with COPY into a database of its own that it drops at the end:
// the list, its filters and the groups, each as the API runs it. Run it
// with -benchtime=40x: each iteration is one request, and it reports the
// p50 and p95 of the iterations in ms, with the machine's load.
//
//	nice -n 10 go test -run '^$' -bench DeadLetterTriage -benchtime 40x ./store/
func BenchmarkDeadLetterTriage(b *testing.B) {
	rows := 1_000_000
	if v := os.Getenv("UUM_BENCH_DLQ_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "UUM_BENCH_DLQ_ROWS")
		rows = n
	}
	ctx := context.Background()
	pool := ownDatabase(b)
	start := time.Now()
	fx := loadDeadLetters(b, pool, rows)
	b.Logf("loaded %d dead letters in %s (load %s)", rows, time.Since(start).Round(time.Second), loadAvg())
	st := store.New(pool)
	open := store.DeadLetterFilter{Status: store.DeadLetterOpen}
	with := func(f func(*store.DeadLetterFilter)) store.DeadLetterFilter {
		g := open
		f(&g)
		return g
	}
	list := func(f store.DeadLetterFilter) func() error {
		return func() error { _, err := st.ScanDeadLetters(ctx, f, 0, 51); return err }
	}
	group := func(f store.DeadLetterFilter, by string) func() error {
		return func() error { _, err := st.DeadLetterGroups(ctx, f, by, 100); return err }
	}
	ops := []struct {
		name string
		run  func() error
	}{
		{"List", list(open)},
		{"ListDeepCursor", func() error { _, err := st.ScanDeadLetters(ctx, open, int64(rows/2), 51); return err }},
		{"FilterEventCommon", list(with(func(f *store.DeadLetterFilter) { f.EventName = "Page Viewed" }))},
		{"FilterEventRare", list(with(func(f *store.DeadLetterFilter) { f.EventName = fx.rareName }))},
		{"FilterUser", list(with(func(f *store.DeadLetterFilter) { f.UserID = fx.user }))},
		{"FilterReasonCommon", list(with(func(f *store.DeadLetterFilter) { f.Reason = "unknown event name" }))},
		{"FilterReasonRare", list(with(func(f *store.DeadLetterFilter) { f.Reason = "buffered_at" }))},
		{"FilterRawRare", list(with(func(f *store.DeadLetterFilter) { f.Raw = fx.user[:13] }))},
		{"GroupByReason", group(open, store.GroupByReason)},
		{"GroupByEvent", group(open, store.GroupByEventName)},
		{"GroupByEventOfReason", group(with(func(f *store.DeadLetterFilter) { f.Reason = "must match" }), store.GroupByEventName)},
		{"GroupByReasonOfUser", group(with(func(f *store.DeadLetterFilter) { f.UserID = fx.user }), store.GroupByReason)},
		{"GroupByEventOfRaw", group(with(func(f *store.DeadLetterFilter) { f.Raw = "Viewed" }), store.GroupByEventName)},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			require.NoError(b, op.run()) // warm
			took := make([]float64, 0, b.N)
			for range b.N {
				t0 := time.Now()
				require.NoError(b, op.run())
				took = append(took, float64(time.Since(t0).Microseconds())/1000)
			}
			slices.Sort(took)
			p50, p95 := percentile(took, 0.50), percentile(took, 0.95)
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p95, "p95-ms")
			b.Logf("%-22s p50 %7.1f ms  p95 %7.1f ms  (%d requests, %d rows, load %s)", op.name, p50, p95, len(took), rows, loadAvg())
		})
	}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(math.Ceil(p*float64(len(sorted))))-1]
}

// ownDatabase creates a migrated database beside the test database and
// drops it when b ends.
func ownDatabase(b *testing.B) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	u, err := url.Parse(dbtest.URL())
	require.NoError(b, err)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "uum_dlq_bench_" + hex.EncodeToString(suffix[:])
	admin, err := pgx.Connect(ctx, u.String())
	require.NoError(b, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(b, err)
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(b, err)
	b.Cleanup(func() {
		pool.Close()
		_, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		require.NoError(b, err)
		require.NoError(b, admin.Close(ctx))
	})
	require.NoError(b, migrations.Apply(ctx, pool, slog.New(slog.DiscardHandler)))
	return pool
}

// triageFixture names what the loaded dead letters hold: an event name
// of about 50 of them and a user of a few.
type triageFixture struct {
	rareName string
	user     string
}

// loadDeadLetters copies n dead letters as drains make them: user events
// whose names the policy refused (a few drainers, a long allow-list),
// names of a bad syntax, undecodable entries and tracked events with a
// bad time; 200,000 users; mostly open, some replayed or deleted; first
// failures over 14 days, oldest first.
func loadDeadLetters(b *testing.B, pool *pgxpool.Pool, n int) triageFixture {
	b.Helper()
	ctx := context.Background()
	r := mrand.New(mrand.NewPCG(1, 2))
	users := make([]uum.UUID, 200_000)
	for i := range users {
		users[i] = uum.NewUUID()
	}
	typos := []string{"Page Viewed", "page viewed", "PageViewed", "Signup", "Login Succeeded", "Report Exported", "Checkout Started"}
	var unknown []string
	for i := range 40 {
		unknown = append(unknown, fmt.Sprintf("feature_%02d_used", i))
	}
	allow := "lists 24 names: account_created, checkout_started, login, logout, page_viewed, report_exported, …"
	first := time.Now().Add(-14 * 24 * time.Hour)
	step := 14 * 24 * time.Hour / time.Duration(max(n, 1))
	fx := triageFixture{rareName: "feature_00_used", user: users[7].String()}
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		i++
		u := users[r.IntN(len(users))]
		at := first.Add(time.Duration(i) * step)
		var name, reason string
		var raw []byte
		switch k := r.IntN(100); {
		case k < 60:
			name = unknown[r.IntN(len(unknown))]
			if name == fx.rareName && r.IntN(100) > 0 {
				name = unknown[1]
			}
			reason = fmt.Sprintf("unknown event name: refused by drainer proc-%d:%d, whose UUM_EVENT_NAMES %s", r.IntN(4), 4000+r.IntN(4), allow)
		case k < 85:
			name = typos[r.IntN(len(typos))]
			reason = fmt.Sprintf("invalid event_name %q: must match ^[a-z0-9][a-z0-9_.:-]{0,49}$", name)
		case k < 95:
			raw = []byte(fmt.Sprintf(`{"user_id":"%s","event_name":"page_viewed"`, u))
			reason = "invalid JSON: unexpected end of JSON input"
		default:
			raw = []byte(fmt.Sprintf(`{"v":2,"id":"%s","type":"account.connected","occurred_at":"2099-01-01T00:00:00Z","org_id":"o-%d","buffered_at":%d}`, uum.NewUUID(), r.IntN(500), at.UnixMilli()))
			reason = `invalid occurred_at "2099-01-01T00:00:00Z": more than 5m0s after the drain's clock: the producer's clock runs ahead (buffered_at)`
		}
		var nameCol, userCol any
		if name != "" {
			raw = uum.Event{UserID: u, Name: "x"}.MarshalWire(at)
			raw = []byte(strings.Replace(string(raw), `"x"`, strconv.Quote(name), 1))
			nameCol, userCol = name, [16]byte(u)
		} else if raw[1] == '"' && raw[2] == 'u' {
			userCol = [16]byte(u)
		}
		status, closed := store.DeadLetterOpen, any(nil)
		if k := r.IntN(100); k < 10 {
			status, closed = store.DeadLetterReplayed, at.Add(time.Hour)
		} else if k < 15 {
			status, closed = store.DeadLetterDeleted, at.Add(time.Hour)
		}
		return []any{fmt.Sprintf("dl_%024x", i), raw, reason, nameCol, userCol, at, at, status, closed}, nil
	})
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"dead_letters"},
		[]string{"correlation_id", "raw", "reason", "event_name", "user_id", "created_at", "last_failed_at", "status", "closed_at"}, src)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, "VACUUM ANALYZE dead_letters")
	require.NoError(b, err)
	return fx
}
