package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/config"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/pause"
	"github.com/uumhq/uum/processor"
	"github.com/uumhq/uum/seencache"
	"github.com/uumhq/uum/store"
)

// pauseBound is how soon a pause must stop a running drain: the switch's
// staleness and one batch, with room for a busy machine.
const pauseBound = 15 * time.Second

// gatedStore is the real store whose commits wait until the test opens
// the gate: a drain run held mid-batch, to be paused while it runs.
type gatedStore struct {
	*store.Store
	gate    chan struct{} // closed: commits go through
	waiting atomic.Bool   // a commit waits at the gate
	commits atomic.Int64
}

func (g *gatedStore) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	g.waiting.Store(true)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	err := g.Store.InTx(ctx, fn)
	if err == nil {
		g.commits.Add(1)
	}
	return err
}

var _ processor.Store = (*gatedStore)(nil)

// startProcessor runs d as a processor does (asynq's scheduler and
// server) on the stack's Redis, which must be the test's own
// (testenv.NewExclusive), until the test ends. It returns once the
// scheduler's entries are in Redis: until then the API sees no processor
// (health no_processor, drain now 409), as it would of a real processor
// in its first heartbeat.
func (b *testBundle) startProcessor(t *testing.T, cfg config.Processor, d *processor.Drainer, logger *slog.Logger) {
	t.Helper()
	opt := b.Redis.Options()
	redisOpt := asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Password: opt.Password}
	svc := processor.NewService(redisOpt, processor.QueueName(b.Prefix), cfg, d, logger)
	require.NoError(t, svc.Start())
	t.Cleanup(svc.Stop)
	sched := processor.NewSchedule(redisOpt, processor.QueueName(b.Prefix))
	defer func() { _ = sched.Close() }()
	require.Eventually(t, func() bool {
		next, _, err := sched.NextDrain(context.Background())
		return err == nil && !next.IsZero()
	}, time.Minute, 50*time.Millisecond, "the processor's scheduler writes its entries")
}

// TestOperatorActionsInBrowser drives the console's actions against a
// running processor (asynq's scheduler and server, in this process) and
// checks the API's and the database's answers: pausing ingestion makes
// the API refuse events until resumed; pausing draining stops a drain
// that is running within pauseBound, after the batch it was committing;
// drain now, once resumed, empties the buffer, each pair counted once;
// the audit log has every action under the token's name, on its page
// too. A read token sees the pause state but no action, and the API
// refuses it one.
func TestOperatorActionsInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	ctx := context.Background()
	b := setupOn(t, testenv.NewExclusive(t)) // asynq's keys take no prefix
	b.Env["UUM_API_TOKENS"] += ",oncall=admin:" + adminToken
	s := b.start(t)
	st := store.New(b.Pool)
	buf := buffer.New(b.Redis, b.Prefix, 0)
	depth := func() int64 {
		t.Helper()
		n, err := buf.Len(ctx)
		require.NoError(t, err)
		return n
	}
	counted := func() int64 {
		t.Helper()
		var n int64
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM unique_user_events WHERE event_name = 'opened'`).Scan(&n))
		return n
	}
	br := startBrowser(t, chromium)
	// confirmed clicks sel and the confirm dialog's OK.
	confirmed := func(tab *tab, sel string) {
		t.Helper()
		tab.click(t, sel)
		tab.waitFor(t, `document.querySelector('#confirm').open`)
		tab.click(t, `#confirm-ok`)
	}
	overview := func(token string) *tab {
		t.Helper()
		tab := br.open(t)
		tab.signIn(t, s.base, token)
		tab.waitFor(t, `document.querySelector('[data-part="drain"]') !== null`)
		return tab
	}

	// A read token: the pause state, no action; the API refuses them.
	tab := overview(readToken)
	require.Equal(t, "true", tab.text(t, ``, `String(document.querySelector('#drain-now, #pause-drain, #pause-ingest, #resume-drain, #resume-ingest') === null
		&& document.querySelector('[data-running="drain"]') !== null && document.querySelector('[data-running="ingest"]') !== null)`),
		"the state, and no action")
	for _, path := range []string{"/v1/pause", "/v1/resume"} {
		code, body := b.do(t, http.MethodPost, s.base+path, readToken, `{"what":"drain"}`)
		require.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
	}
	code, body := b.do(t, http.MethodPost, s.base+"/v1/drain", readToken, "")
	require.Equal(t, http.StatusForbidden, code, body)
	tab.requireClean(t, s.base)

	// Ingestion: paused, the API refuses events; resumed, it takes them.
	event := `{"user_id":"` + userID + `","event_names":["opened"]}`
	tab = overview(adminToken)
	confirmed(tab, `#pause-ingest`)
	tab.waitFor(t, `document.querySelector('[data-paused="ingest"]')?.textContent.startsWith('paused by oncall')`)
	code, body = b.do(t, http.MethodPost, s.base+"/v1/events", ingestToken, event)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"code":"ingest_paused"`)
	confirmed(tab, `#resume-ingest`)
	tab.waitFor(t, `document.querySelector('[data-running="ingest"]') !== null`)
	code, body = b.do(t, http.MethodPost, s.base+"/v1/events", ingestToken, event)
	require.Equal(t, http.StatusAccepted, code, body)
	tab.requireClean(t, s.base)

	// Draining: a run held in its first batch is paused from the page.
	entries := make([][]byte, 300)
	for i := range entries {
		entries[i] = uum.Event{UserID: uum.NewUUID(), Name: "opened"}.MarshalWire(time.Now())
	}
	require.NoError(t, buf.Push(ctx, entries))
	gated := &gatedStore{Store: st, gate: make(chan struct{})}
	sw := pause.New(b.Redis, b.Prefix)
	cfg := config.Processor{BatchSize: 10, MaxIterations: 1000, MaxQueueDepth: 10000, LeaseTTL: 30 * time.Second, DrainInterval: time.Hour, MaxRetry: 3}
	logs := testenv.NewBuffer(t, "processor logs")
	logger := slog.New(slog.NewTextHandler(logs, nil))
	d := processor.NewDrainer(cfg, buf, seencache.New(b.Redis, b.Prefix, time.Hour, st), gated, nil, logger, processor.WithPause(sw))
	b.startProcessor(t, cfg, d, logger)
	require.Eventually(t, gated.waiting.Load, 30*time.Second, 20*time.Millisecond, "the drain at start commits its first batch")

	tab = overview(adminToken)
	pausedAt := time.Now()
	confirmed(tab, `#pause-drain`)
	tab.waitFor(t, `document.querySelector('[data-paused="drain"]')?.textContent.startsWith('paused by oncall')`)
	var state struct {
		Paused pause.State `json:"paused"`
	}
	code, body = b.do(t, http.MethodGet, s.base+"/v1/pause", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &state))
	require.Equal(t, "oncall", state.Paused.Drain.By)
	require.Nil(t, state.Paused.Ingest)
	// The drainer's switch reads the pause (within pause.MaxStaleness);
	// then the held batch commits, and the run stops after it.
	require.Eventually(t, func() bool {
		p, err := sw.DrainPaused(ctx)
		return err == nil && p
	}, pauseBound, 20*time.Millisecond)
	close(gated.gate)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "drain stopped: paused")
	}, pauseBound, 20*time.Millisecond, "the running drain stops")
	stoppedIn := time.Since(pausedAt)
	require.Less(t, stoppedIn, pauseBound)
	t.Logf("a pause from the console stopped the running drain in %s", stoppedIn.Round(time.Millisecond))
	require.EqualValues(t, 1, gated.commits.Load(), "after the batch it was committing")
	require.EqualValues(t, 10, counted(), "which committed")
	require.EqualValues(t, 291, depth(), "and was trimmed; the rest waits")
	tab.requireClean(t, s.base)

	// Resumed, and drained now from the page: the buffer empties.
	tab = overview(adminToken)
	confirmed(tab, `#resume-drain`)
	tab.waitFor(t, `document.querySelector('[data-running="drain"]') !== null`)
	require.Eventually(t, func() bool {
		p, err := sw.DrainPaused(ctx)
		return err == nil && !p
	}, pauseBound, 20*time.Millisecond, "the drainer reads the resume")
	confirmed(tab, `#drain-now`)
	require.Eventually(t, func() bool {
		n, err := buf.Len(ctx) // no require here: it would end Eventually's goroutine
		return err == nil && n == 0
	}, 60*time.Second, 50*time.Millisecond, "drain now empties the buffer")
	require.EqualValues(t, 301, counted(), "every pair once")
	var users int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT unique_users FROM unique_event_totals WHERE event_name = 'opened'`).Scan(&users))
	require.EqualValues(t, 301, users)
	tab.requireClean(t, s.base)

	// The audit log: every action, under the token's name, in the
	// database, the API and the page.
	want := []string{store.ActionDrainNow, store.ActionResume, store.ActionPause, store.ActionResume, store.ActionPause}
	rows, err := st.Actions(ctx, store.ActionFilter{}, 0, 10)
	require.NoError(t, err)
	require.Len(t, rows, len(want))
	var audit struct {
		Actions []store.ActionRecord `json:"actions"`
	}
	code, body = b.do(t, http.MethodGet, s.base+"/v1/audit", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	require.Len(t, audit.Actions, len(want))
	for i, a := range want {
		require.Equal(t, a, rows[i].Action, i)
		require.Equal(t, "oncall", rows[i].Actor, i)
		require.Equal(t, rows[i].ID, audit.Actions[i].ID)
		require.Equal(t, rows[i].Action, audit.Actions[i].Action)
	}
	require.JSONEq(t, `{"what":"drain","changed":true}`, string(rows[2].Params))
	tab = br.open(t)
	tab.signIn(t, s.base, readToken)
	tab.eval(t, `location.hash = '#/audit'`)
	tab.waitFor(t, `document.querySelectorAll('#audit-list tr[data-audit-id]').length === 5`)
	require.Equal(t, "drain_now resume pause resume pause", tab.text(t, ``,
		`[...document.querySelectorAll('#audit-list tr[data-audit-id]')].map((r) => r.dataset.action).join(' ')`))
	require.Equal(t, "oncall oncall oncall oncall oncall", tab.text(t, ``,
		`[...document.querySelectorAll('#audit-list [data-actor]')].map((r) => r.dataset.actor).join(' ')`))
	tab.eval(t, `document.querySelector('#audit-action').value = 'pause'; document.querySelector('#audit-filters button[type=submit]').click()`)
	tab.waitFor(t, `document.querySelectorAll('#audit-list tr[data-audit-id]').length === 2
		&& [...document.querySelectorAll('#audit-list tr[data-audit-id]')].every((r) => r.dataset.action === 'pause')`)
	tab.requireClean(t, s.base)
	requireNoTokens(t, b)
}
