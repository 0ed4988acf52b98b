package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/console"
	"github.com/uumhq/uum/internal/rediskey"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/reconcile"
	"github.com/uumhq/uum/rules"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
	"github.com/uumhq/uum/uniqueevents"
)

// consoleCounters are the counters the console test counts.
const consoleCounters = `counters:
  - counterName: active_connections
    mode: persistent
    dimensions: [masterAccountId, region]
    floorAtZero: true
    rules:
      - {on: account.connected, op: increment}
      - {on: account.disconnected, op: decrement}
  - counterName: artifacts_received_1h
    mode: window
    window: 1h
    rules: [{on: artifact_received, op: increment}]
`

// Entries the drain dead-letters that try to run script in the console:
// markup, bytes that are not UTF-8 with control characters, and a
// right-to-left override that would reverse the text after it.
var (
	hostileMarkup = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	hostileBinary = "\xff\xfe<script>window.__pwned=3</script>\x00\x1b[31m"
	hostileBidi   = "{\"v\":1,\"user_id\":\"\u202e<b>evil</b>\",\"event_name\":\"login\"}"
)

// TestConsoleInBrowser drives the console in Debian's Chromium (headless)
// against run's API over real Postgres and Redis that a real drain
// filled: each page loads with no console error and shows the API's
// numbers; a replay from the page moves a dead letter and the counts;
// hostile dead letters render as text; a read token cannot act. With
// UUM_UPDATE_SCREENSHOTS=1 it writes docs/screenshots/*.png.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",admin:" + adminToken
	b.Env["UUM_EVENT_NAMES"] = "signup,login,report_viewed,later"
	b.Env["UUM_DRAIN_LEASE_TTL"] = "120s"
	counters := filepath.Join(t.TempDir(), "counters.yaml")
	require.NoError(t, os.WriteFile(counters, []byte(consoleCounters), 0o600))
	b.Env["UUM_COUNTERS_FILE"] = counters
	f := seedConsole(t, b, counters)
	s := b.start(t)
	br := startBrowser(t, chromium)
	shots := screenshotDir(t)
	api := func(path string, v any) {
		t.Helper()
		code, body := b.do(t, http.MethodGet, s.base+path, adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), v))
	}
	var metrics struct {
		Data pipemetrics.Snapshot `json:"data"`
	}

	t.Run("ServedWithAStrictPolicy", func(t *testing.T) {
		resp, err := b.client.Get(s.base + "/ui/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, console.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		resp, err = b.client.Get(s.base + "/ui/js/app.js")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	})

	t.Run("Overview", func(t *testing.T) {
		tab := br.open(t)
		tab.signIn(t, s.base, adminToken)
		tab.waitFor(t, `document.querySelector('[data-metric=queue_depth]').textContent !== '–'
			&& document.querySelectorAll('.spark canvas').length === 8`)
		tab.waitFor(t, `document.querySelector('[data-tile=lease] .flag').textContent === 'holder dead?'`)
		api("/v1/metrics", &metrics)
		require.Equal(t, metrics.Data.QueueDepth, tab.number(t, `[data-metric=queue_depth]`))
		require.Equal(t, metrics.Data.DLQCount, tab.number(t, `[data-metric=dlq_count]`))
		var status struct {
			Lease struct {
				Holder string `json:"holder"`
			} `json:"lease"`
		}
		api("/v1/status", &status)
		require.Equal(t, status.Lease.Holder, tab.text(t, `[data-metric=lease]`), "the dead holder is named")
		require.Equal(t, "0 drifted", tab.text(t, `[data-metric=drifted]`))
		tab.screenshot(t, shots, "overview")

		// Live: a new entry shows within a refresh.
		require.NoError(t, f.buf.Push(t.Context(), [][]byte{uum.Event{UserID: uum.NewUUID(), Name: "login"}.MarshalWire(time.Now())}))
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('[data-metric=queue_depth]').textContent === '%d'`, metrics.Data.QueueDepth+1))
		// Paused while hidden, live again when shown.
		tab.eval(t, `Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
			document.dispatchEvent(new Event('visibilitychange'))`)
		tab.waitFor(t, `document.querySelector('.live-text').textContent.startsWith('Paused')`)
		tab.eval(t, `delete document.hidden; document.dispatchEvent(new Event('visibilitychange'))`)
		tab.waitFor(t, `document.querySelector('.live-text').textContent.startsWith('Live')`)
		require.NoError(t, f.lease.Release(t.Context()))
		tab.waitFor(t, `document.querySelector('[data-metric=lease]').textContent === 'free'`)
		tab.requireClean(t, s.base)
	})

	t.Run("UniqueUsers", func(t *testing.T) {
		tab := br.open(t)
		tab.signIn(t, s.base, adminToken)
		tab.eval(t, `location.hash = '#/users'`)
		var counts struct {
			Counts []uum.Count `json:"counts"`
		}
		api("/v1/unique-counts", &counts)
		require.Len(t, counts.Counts, 3)
		tab.waitFor(t, fmt.Sprintf(`document.querySelectorAll('[data-total]').length === %d
			&& document.querySelector('.chart canvas') !== null`, len(counts.Counts)))
		for _, c := range counts.Counts {
			require.Equal(t, c.UniqueUsers, tab.number(t, `[data-total="`+c.EventName+`"]`), c.EventName)
		}
		selected := counts.Counts[0]
		require.Equal(t, selected.UniqueUsers, tab.number(t, `[data-metric=series_total]`))
		tab.screenshot(t, shots, "unique-users")
		tab.eval(t, `document.querySelector('.segmented [data-value="90"]').click()`)
		tab.waitFor(t, `document.querySelector('.segmented .active').dataset.value === '90' && document.querySelector('.chart canvas') !== null`)
		to := time.Now().UTC()
		from := to.AddDate(0, 0, -89)
		var series struct {
			Points []struct {
				Start      string `json:"start"`
				NewUsers   int64  `json:"new_users"`
				Cumulative int64  `json:"cumulative"`
			} `json:"points"`
		}
		api(fmt.Sprintf("/v1/unique-counts/%s/series?period=day&from=%s&to=%s", selected.EventName, from.Format(time.DateOnly), to.Format(time.DateOnly)), &series)
		require.Len(t, series.Points, 90)
		require.Equal(t, series.Points[89].Cumulative, tab.number(t, `[data-metric=reach]`))

		// The CSV is the series.
		tab.eval(t, `window.__csv = null; const make = URL.createObjectURL;
			URL.createObjectURL = (blob) => { blob.text().then((s) => { window.__csv = s; }); return make(blob); };
			[...document.querySelectorAll('button')].find((b) => b.textContent === 'Download CSV').click()`)
		tab.waitFor(t, `window.__csv !== null`)
		lines := []string{"date,new_users,cumulative"}
		for _, p := range series.Points {
			lines = append(lines, fmt.Sprintf("%s,%d,%d", p.Start, p.NewUsers, p.Cumulative))
		}
		require.Equal(t, strings.Join(lines, "\n")+"\n", tab.text(t, ``, `window.__csv`))
		tab.requireClean(t, s.base)
	})

	t.Run("CountersAndWindows", func(t *testing.T) {
		tab := br.open(t)
		tab.signIn(t, s.base, adminToken)
		tab.eval(t, `location.hash = '#/counters'`)
		var page struct {
			Items []struct {
				Dimensions map[string]string `json:"dimensions"`
				Value      int64             `json:"value"`
			} `json:"items"`
		}
		api("/v1/counters/active_connections?limit=25", &page)
		require.NotEmpty(t, page.Items)
		tab.waitFor(t, fmt.Sprintf(`document.querySelectorAll('[data-value]').length === %d`, len(page.Items)))
		for _, it := range page.Items {
			key, err := json.Marshal(it.Dimensions)
			require.NoError(t, err)
			require.Equal(t, it.Value, tab.number(t, `[data-value='`+string(key)+`']`), "%v", it.Dimensions)
		}
		tab.screenshot(t, shots, "counters")

		// One key looked up by its dimensions.
		tab.eval(t, `document.querySelector('[data-dim=masterAccountId]').value = 'm-1';
			document.querySelector('[data-dim=region]').value = 'eu';
			document.querySelector('.filters button[type=submit]').click()`)
		tab.waitFor(t, `document.querySelectorAll('[data-value]').length === 1`)
		var one struct {
			Value int64 `json:"value"`
		}
		api("/v1/counters/active_connections?dim.masterAccountId=m-1&dim.region=eu", &one)
		require.Equal(t, one.Value, tab.number(t, `[data-value]`))

		tab.eval(t, `const s = document.querySelector('#counter-picker'); s.value = 'artifacts_received_1h'; s.dispatchEvent(new Event('change'))`)
		var top struct {
			Orgs []struct {
				OrgID string `json:"org_id"`
				Value int64  `json:"value"`
			} `json:"orgs"`
		}
		api("/v1/windows/artifacts_received_1h/top?limit=10", &top)
		require.Len(t, top.Orgs, 6)
		tab.waitFor(t, `document.querySelectorAll('[data-org]').length >= 6 && document.querySelectorAll('.chart canvas').length === 2`)
		for _, o := range top.Orgs {
			require.Equal(t, o.Value, tab.number(t, `span[data-org="`+o.OrgID+`"]`), o.OrgID)
		}
		var platform struct {
			Value int64 `json:"value"`
		}
		api("/v1/windows/artifacts_received_1h", &platform)
		require.Equal(t, platform.Value, tab.number(t, `[data-metric=window_platform]`))
		tab.screenshot(t, shots, "windows")
		tab.requireClean(t, s.base)
	})

	t.Run("DeadLetters", func(t *testing.T) {
		tab := br.open(t)
		tab.signIn(t, s.base, adminToken)
		tab.eval(t, `location.hash = '#/dead-letters'`)
		open := f.deadLetters(t, b, s.base)
		require.Len(t, open, 5)
		tab.waitFor(t, fmt.Sprintf(`document.querySelectorAll('tr[data-id]').length === %d && document.querySelector('[data-metric=dlq_count]') !== null`, len(open)))
		api("/v1/metrics", &metrics)
		require.Equal(t, metrics.Data.DLQCount, tab.number(t, `[data-metric=dlq_count]`))

		// Hostile entries render as text, and nothing of them runs.
		for raw, shown := range map[string]string{
			hostileMarkup: hostileMarkup,
			hostileBinary: `\xff\xfe<script>window.__pwned=3</script>\x00\x1b[31m`,
			hostileBidi:   `{"v":1,"user_id":"\u202e<b>evil</b>","event_name":"login"}`,
		} {
			tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, open[raw]))
			tab.waitFor(t, fmt.Sprintf(`document.querySelector('#dl-raw') !== null && document.querySelector('.card-title').closest('.card') !== null
				&& document.querySelector('#dl-detail .card-title')?.textContent === 'Dead letter %d'`, open[raw]))
			require.Equal(t, shown, tab.text(t, `#dl-raw`))
		}
		require.Equal(t, "undefined", tab.text(t, ``, `typeof window.__pwned`), "no hostile script ran")
		require.Equal(t, "0", tab.text(t, ``, `String(document.querySelectorAll('#page script, #page img, #page b').length)`), "no hostile element was made")
		tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, open[hostileMarkup]))
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('#dl-detail .card-title')?.textContent === 'Dead letter %d'`, open[hostileMarkup]))
		tab.screenshot(t, shots, "dead-letters")

		// Replay one: it leaves the open list, the counts follow.
		later := open["later-1"]
		depth := metrics.Data.QueueDepth
		tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, later))
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('#dl-detail .card-title')?.textContent === 'Dead letter %d' && document.querySelector('#dl-replay') !== null`, later))
		tab.click(t, `#dl-replay`)
		tab.waitFor(t, `document.querySelector('#confirm').open`)
		tab.click(t, `#confirm-ok`)
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('tr[data-id="%d"]') === null
			&& document.querySelector('[data-metric=dlq_count]').textContent === '%d'`, later, len(open)-1))
		api("/v1/metrics", &metrics)
		require.Equal(t, int64(len(open)-1), metrics.Data.DLQCount)
		require.Equal(t, depth+1, metrics.Data.QueueDepth, "the replayed entry is buffered again")
		require.Equal(t, depth+1, tab.number(t, `[data-metric=queue_depth]`))
		require.Equal(t, store.DeadLetterReplayed, f.status(t, b, s.base, later))

		// Bulk replay: the dry run's preview first, then the replay.
		var dry struct {
			WouldReplay  int64 `json:"would_replay"`
			StillInvalid int64 `json:"still_invalid"`
		}
		code, body := b.do(t, http.MethodPost, s.base+"/v1/dlq/replay?status=open&dry_run=true", adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &dry))
		require.Equal(t, int64(1), dry.WouldReplay, "later-2")
		tab.click(t, `#bulk-replay`)
		tab.waitFor(t, `document.querySelector('#confirm').open && document.querySelector('[data-metric=would_replay]') !== null`)
		require.Equal(t, dry.WouldReplay, tab.number(t, `[data-metric=would_replay]`))
		require.Equal(t, dry.StillInvalid, tab.number(t, `[data-metric=still_invalid]`))
		tab.screenshot(t, shots, "dead-letters-bulk-replay", true)
		tab.click(t, `#confirm-ok`)
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('tr[data-id="%d"]') === null
			&& document.querySelector('[data-metric=dlq_count]').textContent === '%d'`, open["later-2"], len(open)-2))
		require.Equal(t, store.DeadLetterReplayed, f.status(t, b, s.base, open["later-2"]))

		// Delete one.
		gone := open[hostileBidi]
		tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, gone))
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('#dl-detail .card-title')?.textContent === 'Dead letter %d' && document.querySelector('#dl-delete') !== null`, gone))
		tab.click(t, `#dl-delete`)
		tab.waitFor(t, `document.querySelector('#confirm').open`)
		tab.click(t, `#confirm-ok`)
		tab.waitFor(t, fmt.Sprintf(`document.querySelector('tr[data-id="%d"]') === null && document.querySelector('#dl-detail .badge-deleted') !== null`, gone))
		require.Equal(t, store.DeadLetterDeleted, f.status(t, b, s.base, gone))
		api("/v1/metrics", &metrics)
		require.Equal(t, metrics.Data.DLQCount, tab.number(t, `[data-metric=dlq_count]`))
		tab.requireClean(t, s.base)
	})

	t.Run("AReadTokenCannotAct", func(t *testing.T) {
		tab := br.open(t)
		tab.signIn(t, s.base, readToken)
		require.Equal(t, "read only", tab.text(t, `#scope-badge`))
		tab.eval(t, `location.hash = '#/dead-letters'`)
		tab.waitFor(t, `document.querySelectorAll('tr[data-id]').length > 0`)
		id := tab.number(t, `tr[data-id]`, `document.querySelector('tr[data-id]').dataset.id`)
		tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, id))
		tab.waitFor(t, `document.querySelector('#dl-raw') !== null`)
		require.Equal(t, "true", tab.text(t, ``, `String(document.querySelector('#bulk-replay') === null
			&& document.querySelector('#dl-replay') === null && document.querySelector('#dl-delete') === null)`), "no action is offered")
		tab.screenshot(t, shots, "dead-letters-read-only")
		// The API refuses the actions whatever a page offers.
		for _, r := range []struct{ method, path string }{
			{http.MethodPost, fmt.Sprintf("/v1/dlq/%d/replay", id)},
			{http.MethodDelete, fmt.Sprintf("/v1/dlq/%d", id)},
			{http.MethodPost, "/v1/dlq/replay"},
		} {
			code, body := b.do(t, r.method, s.base+r.path, readToken, "")
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", r.method, r.path, body)
		}
		tab.requireClean(t, s.base)
	})

	t.Run("ShardedOverview", func(t *testing.T) {
		testShardedOverview(t, br, shots)
	})

	requireNoTokens(t, b)
}

// requireNoTokens fails if a token reached the API's logs.
func requireNoTokens(t *testing.T, b *testBundle) {
	t.Helper()
	for _, tok := range []string{adminToken, readToken} {
		require.NotContains(t, b.logs.String(), tok, "no token in the API's logs")
	}
}

// A drain lease holder that tries to run script and to reverse the text
// after it, and how the console shows it.
const (
	hostileHolder      = "<img src=x onerror=\"window.__pwned=4\">\u202e:1"
	hostileHolderShown = `<img src=x onerror="window.__pwned=4">\u202e:1`
)

// shardStatus is what the sharded overview is compared with in GET
// /v1/status.
type shardStatus struct {
	QueueDepth      int64   `json:"queue_depth"`
	QueueLagSeconds float64 `json:"queue_lag_seconds"`
	LeasesHeld      int     `json:"leases_held"`
	Shards          []struct {
		pipemetrics.ShardState
		Lease *struct {
			Holder string `json:"holder"`
			Stale  bool   `json:"stale"`
		} `json:"lease"`
	} `json:"shards"`
}

// shardRow is a row of the overview's shard table, as the page shows it.
type shardRow struct {
	Shard, Depth, Lag, Holder, Lease, Run string
}

// testShardedOverview runs the console against an API with four buffer
// shards (seedShards): the shard table shows each shard's depth, oldest
// entry and lease as /v1/status says, its totals are their sum and the
// oldest, the hostile holder is text, and a released lease shows as free.
func testShardedOverview(t *testing.T, br *browser, shots string) {
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",admin:" + adminToken
	b.Env["UUM_BUFFER_SHARDS"] = "4"
	// Long enough that the stale lease seedShards leaves outlives a slow
	// run of the test.
	b.Env["UUM_DRAIN_LEASE_TTL"] = "10m"
	lease := seedShards(t, b)
	s := b.start(t)
	status := func() shardStatus {
		t.Helper()
		var st shardStatus
		code, body := b.do(t, http.MethodGet, s.base+"/v1/status", adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		return st
	}
	tab := br.open(t)
	tab.signIn(t, s.base, adminToken)
	tab.waitFor(t, `document.querySelectorAll('.shards-card:not([hidden]) tr[data-shard]').length === 5
		&& document.querySelector('[data-metric=queue_depth]').textContent !== '–'`)

	// The lags grow with time: the page's lie between a status read before
	// its render and one read after.
	tab.eval(t, `window.__renders = 0;
		new MutationObserver(() => window.__renders++).observe(document.querySelector('.live-text'), {childList: true, subtree: true, characterData: true})`)
	before := status()
	tab.waitFor(t, `window.__renders >= 2`) // the second refresh began after the status was read
	var rows []shardRow
	require.NoError(t, json.Unmarshal([]byte(tab.text(t, ``, `JSON.stringify([...document.querySelectorAll('.shards-card tr[data-shard]')].map((r) => {
		const m = (k) => r.querySelector('[data-metric=' + k + ']')?.textContent ?? '';
		return {Shard: r.dataset.shard, Depth: m('shard_depth'), Lag: m('shard_lag'), Holder: m('shard_holder'), Lease: m('shard_lease'), Run: r.lastElementChild.textContent};
	}))`)), &rows))
	after := status()

	// The status is what was seeded.
	require.Len(t, after.Shards, 4)
	require.Equal(t, []int64{3, 0, 7, 2}, []int64{after.Shards[0].QueueDepth, after.Shards[1].QueueDepth, after.Shards[2].QueueDepth, after.Shards[3].QueueDepth})
	require.Equal(t, int64(12), after.QueueDepth)
	require.Equal(t, 2, after.LeasesHeld)
	require.False(t, after.Shards[2].Lease.Stale)
	require.True(t, after.Shards[3].Lease.Stale)
	require.Equal(t, hostileHolder, after.Shards[3].Lease.Holder)
	require.Equal(t, 5, after.Shards[1].LastRun.Drained)

	// Each shard's row is its status.
	require.Len(t, rows, 5)
	var depths int64
	oldest := rows[0]
	for i, sh := range after.Shards {
		r := rows[i]
		require.Equal(t, strconv.Itoa(sh.Shard), r.Shard)
		require.Equal(t, sh.QueueDepth, parseNumber(t, r.Depth), "shard %d depth", i)
		requireLagBetween(t, r.Lag, before.Shards[i].QueueLagSeconds, sh.QueueLagSeconds)
		holder, flag := "free", ""
		if l := sh.Lease; l != nil {
			holder, flag = strings.ReplaceAll(l.Holder, "\u202e", `\u202e`), "draining"
			if l.Stale {
				flag = "holder dead?"
			}
		}
		require.Equal(t, holder, r.Holder, "shard %d holder", i)
		require.Equal(t, flag, r.Lease, "shard %d lease", i)
		depths += parseNumber(t, r.Depth)
		if parseDuration(t, r.Lag) > parseDuration(t, oldest.Lag) {
			oldest = r
		}
	}
	require.Equal(t, hostileHolderShown, rows[3].Holder)
	require.Contains(t, rows[1].Run, "drained 5")
	require.Equal(t, "none yet", rows[0].Run)

	// The totals: the depths' sum, the oldest shard's lag, the leases held.
	total := rows[4]
	require.Equal(t, "all", total.Shard)
	require.Equal(t, after.QueueDepth, parseNumber(t, total.Depth))
	require.Equal(t, depths, parseNumber(t, total.Depth))
	require.Equal(t, "2", oldest.Shard)
	require.Equal(t, oldest.Lag, total.Lag, "the total lag is the oldest shard's")
	requireLagBetween(t, total.Lag, before.QueueLagSeconds, after.QueueLagSeconds)
	require.Equal(t, fmt.Sprintf("%d of 4 held", after.LeasesHeld), total.Holder)
	require.Equal(t, after.QueueDepth, tab.number(t, `[data-metric=queue_depth]`), "the depth tile adds the shards up")
	require.Equal(t, "2 of 4 shards", tab.text(t, `[data-metric=lease]`))
	require.Equal(t, "holder dead?", tab.text(t, `[data-tile=lease] .flag`))
	require.Equal(t, fmt.Sprintf("held by %s, %s · deepest: shard 2, 7 waiting · not renewed: shard 3", after.Shards[2].Lease.Holder, hostileHolderShown),
		tab.text(t, `[data-tile=lease] .tile-note`))
	require.Equal(t, "undefined", tab.text(t, ``, `typeof window.__pwned`), "no hostile script ran")
	require.Equal(t, "0", tab.text(t, ``, `String(document.querySelectorAll('#page img').length)`), "no hostile element was made")
	tab.screenshot(t, shots, "overview-shards")

	// A released lease shows as free.
	require.NoError(t, lease.Release(t.Context()))
	tab.waitFor(t, `document.querySelector('tr[data-shard="2"] [data-metric=shard_holder]').textContent === 'free'
		&& document.querySelector('tr[data-shard="all"] [data-metric=shard_holder]').textContent === '1 of 4 held'`)
	tab.requireClean(t, s.base)
	requireNoTokens(t, b)
}

// seedShards buffers entries on three of four shards (users routed as
// the API routes them), drains shard 1 for real, and holds two leases:
// shard 2's through buffer's API, renewed (returned), and shard 3's by a
// hostile holder that stopped renewing it 6 minutes ago (the API is told
// the drainers renew a 10-minute lease: UUM_DRAIN_LEASE_TTL).
func seedShards(t *testing.T, b *testBundle) *buffer.Lease {
	t.Helper()
	ctx := t.Context()
	const shards = 4
	now := time.Now()
	push := func(shard, n int, oldest time.Duration) {
		var entries [][]byte
		for i := range n {
			u := uum.NewUUID()
			for buffer.ShardOf(u[:], shards) != shard {
				u = uum.NewUUID()
			}
			entries = append(entries, uum.Event{UserID: u, Name: "login"}.MarshalWire(now.Add(-oldest+time.Duration(i)*time.Second)))
		}
		require.NoError(t, buffer.New(b.Redis, b.Prefix, shard).Push(ctx, entries))
	}
	push(0, 3, 40*time.Second)
	push(1, 5, time.Minute)
	push(2, 7, 5*time.Minute)
	push(3, 2, 90*time.Second)

	st := store.New(b.Pool)
	pm := pipemetrics.New(b.Redis, b.Prefix, st).WithShards(shards)
	cfg := config.Processor{BatchSize: 100, MaxIterations: 10, MaxQueueDepth: 100000, LeaseTTL: 10 * time.Second}
	sum, err := processor.NewDrainer(cfg, buffer.New(b.Redis, b.Prefix, 1), seencache.New(b.Redis, b.Prefix, time.Hour, st), st, nil, nil,
		processor.WithRunRecorder(pm.Runs(1))).Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, sum.EventsProcessed)

	lease, err := buffer.New(b.Redis, b.Prefix, 2).Acquire(ctx, 10*time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.WithoutCancel(ctx)) })
	token := fmt.Sprintf("0123456789abcdef/%d/%s", now.Add(-6*time.Minute).UnixMilli(), hostileHolder)
	require.NoError(t, b.Redis.Set(ctx, rediskey.Lease(b.Prefix, 3), token, 4*time.Minute).Err())
	return lease
}

// requireLagBetween checks a lag the page shows (fmt.duration's text)
// lies between lo and hi seconds, give or take its rounding (to 0.1 s,
// or down to whole seconds past a minute).
func requireLagBetween(t *testing.T, shown string, lo, hi float64) {
	t.Helper()
	lag := parseDuration(t, shown)
	require.GreaterOrEqual(t, lag, lo-1, "lag %q", shown)
	require.LessOrEqual(t, lag, hi+0.05, "lag %q", shown)
}

// durationUnits are the units of the console's fmt.duration.
var durationUnits = map[string]float64{"ms": 0.001, "s": 1, "min": 60, "h": 3600, "d": 86400}

// parseDuration reads fmt.duration's text ("850 ms", "12.3 s", "4 min
// 5 s") as seconds.
func parseDuration(t *testing.T, s string) float64 {
	t.Helper()
	f := strings.Fields(s)
	require.True(t, len(f) > 0 && len(f)%2 == 0, "a duration: %q", s)
	var sec float64
	for i := 0; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(strings.ReplaceAll(f[i], ",", ""), 64)
		require.NoError(t, err, s)
		unit, ok := durationUnits[f[i+1]]
		require.True(t, ok, "a duration: %q", s)
		sec += v * unit
	}
	return sec
}

// consoleFixture is what the console test seeded.
type consoleFixture struct {
	buf   *buffer.List
	lease *buffer.Lease // held, unrenewed: a dead drainer's
}

// seedConsole fills the stack through the real drain: three events' users
// over the last 30 days, counter events, dead letters (two replayable
// once the API's policy lists "later", three hostile), a run record, a
// reconciliation and an hour of pipeline history. It leaves the drain
// lease held by a drainer that never renews it.
func seedConsole(t *testing.T, b *testBundle, countersFile string) *consoleFixture {
	t.Helper()
	ctx := t.Context()
	st := store.New(b.Pool)
	buf := buffer.New(b.Redis, b.Prefix, 0)
	pm := pipemetrics.New(b.Redis, b.Prefix, st)
	set, err := rules.Load(countersFile)
	require.NoError(t, err)
	policy, err := uniqueevents.New(config.Events{Names: []string{"signup", "login", "report_viewed"}}, nil, nil, nil, nil, nil)
	require.NoError(t, err)
	cfg := config.Processor{BatchSize: 500, MaxIterations: 100, MaxQueueDepth: 100000, LeaseTTL: 10 * time.Second}
	drainer := processor.NewDrainer(cfg, buf, seencache.New(b.Redis, b.Prefix, time.Hour, st), st, nil, nil,
		processor.WithNames(policy), processor.WithCounters(set, 0),
		processor.WithPipelineMetrics(pm, st), processor.WithRunRecorder(pm))

	// Thirty days of users, imported by a backfill (their first-seen
	// times are the logs' dates), then the last minutes' events, drained.
	now := time.Now()
	var history []store.DatedPair
	var users []uum.UUID
	for day := range 30 {
		at := now.Add(-time.Duration(day)*24*time.Hour - time.Hour)
		for i := range 4 + (day*7)%11 {
			u := uum.NewUUID()
			users = append(users, u)
			history = append(history, store.DatedPair{Pair: uum.Pair{UserID: u, Name: "signup"}, CreatedAt: at})
			if i%2 == 0 {
				history = append(history, store.DatedPair{Pair: uum.Pair{UserID: u, Name: "login"}, CreatedAt: at.Add(time.Minute)})
			}
		}
	}
	_, _, err = st.Backfill(ctx, []string{"signup", "login"}, history)
	require.NoError(t, err)
	var entries [][]byte
	for i, u := range users[:len(users)/3] {
		at := now.Add(-time.Duration(i%20) * time.Second)
		entries = append(entries, uum.Event{UserID: u, Name: "report_viewed"}.MarshalWire(at), uum.Event{UserID: u, Name: "login"}.MarshalWire(at))
	}
	seq := 0
	track := func(e uum.TrackedEvent) {
		seq++
		e.ID = fmt.Sprintf("console-%d", seq)
		raw, err := e.AppendWire(nil, now)
		require.NoError(t, err)
		entries = append(entries, raw)
	}
	for i := range 12 {
		region := []string{"eu", "us", "ap"}[i%3]
		for range 1 + i%4 {
			track(uum.TrackedEvent{Type: "account.connected", Dimensions: map[string]string{"masterAccountId": fmt.Sprintf("m-%d", i%5+1), "region": region}})
		}
	}
	for org := range 6 {
		for j := range 14 - 2*org {
			track(uum.TrackedEvent{Type: "artifact_received", OrgID: fmt.Sprintf("org-%d", org+1), OccurredAt: now.Add(-time.Duration((j*7+org*3)%55) * time.Minute)})
		}
	}
	entries = append(entries,
		uum.Event{UserID: uum.NewUUID(), Name: "later"}.MarshalWire(now),
		uum.Event{UserID: uum.NewUUID(), Name: "later"}.MarshalWire(now),
		[]byte(hostileMarkup), []byte(hostileBinary), []byte(hostileBidi))
	require.NoError(t, buf.Push(ctx, entries))
	sum, err := drainer.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, len(entries), sum.EventsProcessed)
	_, err = reconcile.New(st, nil, nil, reconcile.WithRecorder(pm)).Run(ctx, false)
	require.NoError(t, err)

	// An hour of history: the processors' samples (a fixture shaped like
	// a day's traffic) before the current minute's, sampled for real.
	var total int64
	for i := 59; i >= 1; i-- {
		at := now.Add(-time.Duration(i) * time.Minute)
		wave := int64((60 - i) % 17)
		rate := 150 + (wave*37)%120
		total += rate
		drifted := 0
		p := pipemetrics.NewPoint(at, pipemetrics.Snapshot{
			TotalEvents: total, QueueDepth: 20 + wave*9, QueueLagSeconds: float64(wave) * 1.5,
			ProcessingRate: rate, DLQCount: int64(min(3, (60-i)/20)),
			ProcessingTimeMS: pipemetrics.Percentiles{P50: 4000 + float64(wave)*150, P95: 11000 + float64(wave)*300, P99: 15000 + float64(wave)*350, Samples: rate},
		})
		if i%10 == 0 {
			held := 2.5 + float64(wave)/4
			p.LeaseAgeSeconds = &held
		}
		p.Drifted = &drifted
		require.NoError(t, pm.RecordPoint(ctx, p))
	}
	require.NoError(t, processor.NewSampler(pm, buf, nil).Sample(ctx))

	// A drainer that took the lease for 45 s and died: the API, told the
	// drainers renew a 120 s lease, sees it unrenewed for 75 s.
	lease, err := buf.Acquire(ctx, 45*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.WithoutCancel(ctx)) })
	return &consoleFixture{buf: buf, lease: lease}
}

// deadLetters returns the open dead letters' ids by their raw entry;
// the two replayable ones are "later-1" and "later-2".
func (f *consoleFixture) deadLetters(t *testing.T, b *testBundle, base string) map[string]int64 {
	t.Helper()
	var list struct {
		DeadLetters []struct {
			ID        int64   `json:"id"`
			EventName *string `json:"event_name"`
		} `json:"dead_letters"`
	}
	code, body := b.do(t, http.MethodGet, base+"/v1/dlq?status=open", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	out := map[string]int64{}
	later := 0
	for _, d := range list.DeadLetters {
		var item struct {
			Raw       *string `json:"raw"`
			RawBase64 []byte  `json:"raw_base64"`
		}
		code, body := b.do(t, http.MethodGet, fmt.Sprintf("%s/v1/dlq/%d", base, d.ID), adminToken, "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &item))
		switch {
		case d.EventName != nil && *d.EventName == "later":
			later++
			out["later-"+strconv.Itoa(later)] = d.ID
		case item.Raw != nil:
			out[*item.Raw] = d.ID
		default:
			out[string(item.RawBase64)] = d.ID
		}
	}
	return out
}

// status returns a dead letter's status, as the API says.
func (f *consoleFixture) status(t *testing.T, b *testBundle, base string, id int64) string {
	t.Helper()
	var d struct {
		Status string `json:"status"`
	}
	code, body := b.do(t, http.MethodGet, fmt.Sprintf("%s/v1/dlq/%d", base, id), adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	return d.Status
}

// chromiumPath finds Debian's chromium (scripts/services.sh test installs
// it) or TEST_CHROMIUM. Without one the browser tests are skipped, but
// fail under make test (UUM_BROWSER_TESTS=require), so CI cannot pass
// without them; UUM_BROWSER_TESTS=skip skips them even with one, for a
// run of the core only.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("UUM_BROWSER_TESTS") == "skip" {
		t.Skip("UUM_BROWSER_TESTS=skip: the console's browser tests are skipped")
	}
	if p := os.Getenv("TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on PATH and TEST_CHROMIUM unset: scripts/services.sh test installs it"
	if os.Getenv("UUM_BROWSER_TESTS") == "require" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// screenshotDir is docs/screenshots with UUM_UPDATE_SCREENSHOTS=1, else a
// temporary directory: the screenshots are always taken, committed only
// on purpose.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("UUM_UPDATE_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "..", "docs", "screenshots")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// browser is one headless Chromium for the whole test, with a fresh
// profile; each subtest opens a tab of its own.
type browser struct{ ctx context.Context }

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return &browser{ctx: ctx}
}

// tab is a browser tab that records what goes wrong in it.
type tab struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string // console errors, uncaught exceptions, error log entries
	urls     []string // every URL it requested
}

// tabTimeout bounds each subtest's tab: generous for a busy machine, the
// waits are on the page's state.
const tabTimeout = 30 * time.Second

func (br *browser) open(t *testing.T) *tab {
	t.Helper()
	tb := &tab{}
	ctx, cancel := chromedp.NewContext(br.ctx, chromedp.WithListener(tb.listen))
	ctx, cancelTimeout := context.WithTimeout(ctx, tabTimeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	tb.ctx = ctx
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)))
	return tb
}

// listen runs in the tab's event loop: it must only record.
func (tb *tab) listen(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			tb.problems = append(tb.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		tb.problems = append(tb.problems, "exception: "+msg)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			tb.problems = append(tb.problems, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		tb.urls = append(tb.urls, ev.Request.URL)
	}
}

// requireClean fails on any console error the tab saw, and on a request
// anywhere but base (no third-party origin) or with a token in its URL.
func (tb *tab) requireClean(t *testing.T, base string) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	require.Empty(t, tb.problems, "console errors")
	require.NotEmpty(t, tb.urls)
	for _, u := range tb.urls {
		if strings.HasPrefix(u, "blob:"+base+"/") || strings.HasPrefix(u, "data:") {
			continue // the CSV download, the browser's own date-picker icon
		}
		require.True(t, strings.HasPrefix(u, base+"/"), "a request to another origin: %s", u)
		require.NotContains(t, u, adminToken)
		require.NotContains(t, u, readToken)
	}
}

func (tb *tab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(tb.ctx, actions...), "the page said: %v", tb.said())
}

// said returns the problems seen so far, for a failure's message.
func (tb *tab) said() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...)
}

// signIn types the token into the sign-in form, once.
func (tb *tab) signIn(t *testing.T, base, token string) {
	t.Helper()
	tb.do(t, chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-token")),
		chromedp.SendKeys(chromedp.CSS("#signin-token"), token),
		chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#app")))
	loc, err := chromedp.Run(tb.ctx, chromedp.Location())
	require.NoError(t, err)
	require.NotContains(t, loc, token)
}

// waitFor waits until the JavaScript expression is true.
func (tb *tab) waitFor(t *testing.T, expr string) {
	t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
	require.NoError(t, err, "waiting for %s; the page said: %v", expr, tb.said())
}

func (tb *tab) eval(t *testing.T, js string) {
	t.Helper()
	require.NoError(t, chromedp.Do(tb.ctx, chromedp.Evaluate[chromedp.Void](js)))
}

func (tb *tab) click(t *testing.T, sel string) {
	t.Helper()
	tb.eval(t, fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

// text returns the text of the element sel, or what the expression expr
// returns when it is given.
func (tb *tab) text(t *testing.T, sel string, expr ...string) string {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector(%q).textContent`, sel)
	if len(expr) > 0 {
		js = expr[0]
	}
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](js))
	require.NoError(t, err, js)
	return s
}

var digitGroups = regexp.MustCompile(`^-?[0-9][0-9,]*$`)

// number reads a whole number the page shows ("1,234" is 1234).
func (tb *tab) number(t *testing.T, sel string, expr ...string) int64 {
	t.Helper()
	return parseNumber(t, tb.text(t, sel, expr...))
}

// parseNumber reads the whole number text starts with ("1,234 …" is 1234).
func parseNumber(t *testing.T, text string) int64 {
	t.Helper()
	s := strings.Fields(text)
	require.NotEmpty(t, s, text)
	require.Regexp(t, digitGroups, s[0], text)
	n, err := strconv.ParseInt(strings.ReplaceAll(s[0], ",", ""), 10, 64)
	require.NoError(t, err)
	return n
}

// screenshot saves the whole page as dir/name.png, or only what the
// window shows with viewport (a modal dialog covers only that).
func (tb *tab) screenshot(t *testing.T, dir, name string, viewport ...bool) {
	t.Helper()
	shot := chromedp.FullScreenshot(100) // 100: PNG
	if len(viewport) > 0 && viewport[0] {
		shot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(tb.ctx, shot)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}
