package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/pipemetrics"
	"github.com/uumhq/uum/store"
)

// historyPoints is GET /v1/history's answer, as the test reads it.
type historyPoints struct {
	Range  string               `json:"range"`
	Points []pipemetrics.Period `json:"points"`
}

// TestHistoryInBrowser drives the console's History page in Chromium over
// a history that real trims, runs and samples wrote: each range's chart
// draws the API's points, one for one, its totals are the API's sums, and
// hovering a point shows its value; the Overview's cards link to their
// pages.
func TestHistoryInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	ctx := context.Background()
	b := setup(t)
	m := pipemetrics.New(b.Redis, b.Prefix, store.New(b.Pool))
	buf := buffer.New(b.Redis, b.Prefix, 0)
	now := time.Now()
	// Drained 4, 7 and 9 minutes ago (one dead-lettered), a run, a sample.
	for i, n := range map[int]int{4: 5, 7: 8, 9: 3} {
		at := now.Add(-time.Duration(i) * time.Minute)
		entries := make([][]byte, n)
		for j := range entries {
			entries[j] = []byte("x")
		}
		require.NoError(t, buf.Push(ctx, entries))
		lease, err := buf.Acquire(ctx, time.Minute)
		require.NoError(t, err)
		require.NoError(t, lease.TrimTally(ctx, n, buffer.Tally{Delivered: n - 1, Failed: 1, At: at}))
		require.NoError(t, lease.Release(ctx))
	}
	require.NoError(t, m.RecordRun(ctx, pipemetrics.Run{StartedAt: now.Add(-3 * time.Second), FinishedAt: now, Drained: 16}))
	require.NoError(t, m.RecordPeriod(ctx, now, pipemetrics.Snapshot{QueueDepth: 42, QueueLagSeconds: 3}))
	s := b.start(t)
	br := startBrowser(t, chromium)
	api := func(rng string) historyPoints {
		t.Helper()
		code, body := b.do(t, http.MethodGet, s.base+"/v1/history?range="+rng, readToken, "")
		require.Equal(t, http.StatusOK, code, body)
		var h historyPoints
		require.NoError(t, json.Unmarshal([]byte(body), &h))
		return h
	}

	tab := br.open(t)
	tab.signIn(t, s.base, readToken)
	// The Overview's cards link to their pages.
	tab.waitFor(t, `document.querySelector('[data-tile=dlq_count] a.card-link') !== null`)
	require.Equal(t, "#/dead-letters", tab.text(t, "", `document.querySelector('[data-tile=dlq_count] a.card-link').getAttribute('href')`))
	tab.click(t, `[data-tile=queue_depth] a.card-link`)
	tab.waitFor(t, `location.hash === '#/history' && document.querySelector('[data-chart=drained]') !== null`)

	for _, rng := range []string{"24h", "1h", "7d", "90d"} {
		// The page and the API read the same periods unless the minute
		// turns between them: then read both again.
		var h historyPoints
		var drawn [][]*float64
		for range 3 {
			h = api(rng)
			first := strconv.FormatInt(h.Points[0].Start.Unix(), 10)
			tab.click(t, `.segmented button[data-value="`+rng+`"]`)
			tab.waitFor(t, `document.querySelector('[data-chart=drained]').dataset.range === '`+rng+`'`)
			require.NoError(t, json.Unmarshal([]byte(tab.text(t, "", `JSON.stringify(document.querySelector('[data-chart=drained]').__uplot.data)`)), &drawn))
			if tab.text(t, "", `document.querySelector('[data-chart=drained]').dataset.first`) == first {
				break
			}
		}
		require.Len(t, drawn, 3, "%s: the times, drained, dead-lettered", rng)
		require.Len(t, drawn[0], len(h.Points), rng)
		var drained, dead int64
		for i, p := range h.Points {
			require.Equal(t, float64(p.Start.Unix()), *drawn[0][i], "%s: point %d's time", rng, i)
			require.Equal(t, float64(p.Drained), *drawn[1][i], "%s: point %d's drained", rng, i)
			require.Equal(t, float64(p.DeadLettered), *drawn[2][i], "%s: point %d's dead-lettered", rng, i)
			drained, dead = drained+p.Drained, dead+p.DeadLettered
		}
		require.Equal(t, int64(16), drained, rng)
		require.Equal(t, int64(3), dead, rng)
		require.Equal(t, drained, tab.number(t, `[data-metric=history_drained]`), rng)
		require.Equal(t, dead, tab.number(t, `[data-metric=history_dead_lettered]`), rng)
		require.Equal(t, int64(2), tab.number(t, "", `String(document.querySelectorAll("[data-chart=drained] .u-axis").length)`), "%s: a time axis and a count axis", rng)

		// Hover the fullest point: the legend shows its value.
		at, most := 0, int64(-1)
		for i, p := range h.Points {
			if p.Drained > most {
				at, most = i, p.Drained
			}
		}
		tab.eval(t, `(() => {
			const el = document.querySelector('[data-chart=drained]'), u = el.__uplot;
			const r = el.querySelector('.u-over').getBoundingClientRect();
			const x = r.left + u.valToPos(u.data[0][`+strconv.Itoa(at)+`], 'x');
			el.querySelector('.u-over').dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: r.top + r.height / 2, bubbles: true}));
		})()`)
		tab.waitFor(t, `document.querySelector('[data-chart=drained]').__uplot.cursor.idx != null`)
		// A 24-hour chart has several points a pixel: the cursor takes
		// the one nearest the mouse, which must then be what it shows.
		idx := int(tab.number(t, "", `String(document.querySelector('[data-chart=drained]').__uplot.cursor.idx)`))
		if len(h.Points) <= 200 {
			require.Equal(t, at, idx, "%s: the hovered point", rng)
		}
		require.InDelta(t, at, idx, float64(len(h.Points))/100, "%s: the hovered point", rng)
		require.Equal(t, strconv.FormatInt(h.Points[idx].Drained, 10), tab.text(t, "", `document.querySelectorAll('[data-chart=drained] .u-legend .u-value')[1].textContent`), "%s: the hovered value", rng)
	}

	// The sampled figures: the depth in its minute and its hour.
	h := api("1h")
	var depth *int64
	for _, p := range h.Points {
		if p.QueueDepth != nil {
			depth = p.QueueDepth
		}
	}
	require.NotNil(t, depth)
	require.Equal(t, int64(42), *depth)
	tab.requireClean(t, s.base)
}
