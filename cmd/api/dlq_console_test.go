package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeadLetterTriageInBrowser triages in the console: it groups the
// dead letters by event (the API's counts), lists a group, filters it by
// user, opens the entry (its detail in view), has a wrong correction
// refused naming the field, then corrects "Page Viewed" to page_viewed:
// the edit is replayed, the drain counts the pair once, and the API and
// the database keep the original.
func TestDeadLetterTriageInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setup(t)
	b.Env["UUM_API_TOKENS"] += ",triage=admin:" + adminToken
	b.Env["UUM_EVENT_NAMES"] = "page_viewed,signup"
	f := seedTriage(t, b)
	s := b.start(t)
	br := startBrowser(t, chromium)
	tab := br.open(t)
	tab.signIn(t, s.base, adminToken)
	tab.eval(t, `location.hash = '#/dead-letters'`)
	tab.waitFor(t, `document.querySelectorAll('tr[data-id]').length === 5`)

	tab.eval(t, `{ const g = document.querySelector('#dl-group-by'); g.value = 'event_name'; g.dispatchEvent(new Event('change')); }`)
	tab.waitFor(t, `document.querySelectorAll('#dl-groups tr[data-group]').length === 3`)
	var groups struct {
		Groups []struct {
			Key   *string `json:"key"`
			Count int64   `json:"count"`
		} `json:"groups"`
	}
	code, body := b.do(t, http.MethodGet, s.base+"/v1/dlq/groups?by=event_name&status=open", adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &groups))
	require.Len(t, groups.Groups, 3)
	for _, g := range groups.Groups {
		key := ""
		if g.Key != nil {
			key = *g.Key
		}
		require.Equal(t, g.Count, tab.number(t, fmt.Sprintf(`#dl-groups [data-group-count="%s"]`, key)), key)
	}

	tab.click(t, `#dl-groups tr[data-group="Page Viewed"]`)
	tab.waitFor(t, `document.querySelectorAll('tr[data-id]').length === 3 && document.querySelector('[name=event_name]').value === 'Page Viewed'`)
	tab.eval(t, fmt.Sprintf(`document.querySelector('[name=user_id]').value = '%s'; document.querySelector('#dl-filters button[type=submit]').click()`, f.users[1]))
	tab.waitFor(t, `document.querySelectorAll('tr[data-id]').length === 1`)
	id := tab.number(t, `tr[data-id]`, `document.querySelector('tr[data-id]').dataset.id`)
	tab.click(t, fmt.Sprintf(`tr[data-id="%d"]`, id))
	tab.waitFor(t, `document.querySelector('#dl-edit-raw') !== null`)
	require.Equal(t, "true", tab.text(t, ``, `String((() => { const r = document.querySelector('#dl-detail').getBoundingClientRect();
		return r.width > 0 && r.top >= 0 && r.top < innerHeight; })())`), "the detail opens in view")

	edit := func(from, to string) {
		t.Helper()
		tab.eval(t, fmt.Sprintf(`{ const e = document.querySelector('#dl-edit-raw'); e.value = e.value.replace('%s', '%s'); }`, from, to))
		tab.click(t, `#dl-edit-save`)
		tab.waitFor(t, `document.querySelector('#confirm').open`)
		tab.click(t, `#confirm-ok`)
	}
	edit("Page Viewed", "page_viewd")
	tab.waitFor(t, `!document.querySelector('#dl-edit-error').hidden`)
	require.Contains(t, tab.text(t, `#dl-edit-error`), "raw.event_name: unknown event name")
	edit("page_viewd", "page_viewed")
	tab.waitFor(t, fmt.Sprintf(`document.querySelector('tr[data-id="%d"]') === null && document.querySelector('#dl-original') !== null`, id))
	require.Contains(t, tab.text(t, `#dl-original`), `"Page Viewed"`)
	require.Contains(t, tab.text(t, `#dl-raw`), `"page_viewed"`)

	f.drain(t)
	require.Equal(t, int64(1), f.count(t, b, "page_viewed"), "the edited entry counts once")
	var item struct {
		Status      string `json:"status"`
		Raw         string `json:"raw"`
		OriginalRaw string `json:"original_raw"`
	}
	code, body = b.do(t, http.MethodGet, fmt.Sprintf("%s/v1/dlq/%d", s.base, id), adminToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &item))
	require.Equal(t, "replayed", item.Status)
	require.Contains(t, item.Raw, `"page_viewed"`)
	require.Contains(t, item.OriginalRaw, `"Page Viewed"`)
	var original string
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT convert_from(original_raw, 'UTF8') FROM dead_letters WHERE id = $1`, id).Scan(&original))
	require.Equal(t, item.OriginalRaw, original)
	var users int64
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT unique_users FROM unique_event_totals WHERE event_name = 'page_viewed'`).Scan(&users))
	require.Equal(t, int64(1), users)
	// The refused edit's 422 is the one thing the browser logs; the
	// console test checks the page's requests and errors otherwise.
	for _, said := range tab.said() {
		require.Contains(t, said, "status of 422 (Unprocessable Entity)", "console errors")
		require.Contains(t, said, fmt.Sprintf("/v1/dlq/%d/edit", id), "console errors")
	}

	// The audit log has the correction under the token's name, on its
	// page too; the refused one is not an action.
	var audit struct {
		Actions []struct {
			Actor   string          `json:"actor"`
			Action  string          `json:"action"`
			Entries int64           `json:"entries"`
			Params  json.RawMessage `json:"params"`
		} `json:"actions"`
	}
	code, body = b.do(t, http.MethodGet, s.base+"/v1/audit", readToken, "")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &audit))
	require.Len(t, audit.Actions, 1)
	require.Equal(t, "triage", audit.Actions[0].Actor)
	require.Equal(t, "dlq.edit", audit.Actions[0].Action)
	require.EqualValues(t, 1, audit.Actions[0].Entries)
	require.JSONEq(t, fmt.Sprintf(`{"id":%d}`, id), string(audit.Actions[0].Params))
	page := br.open(t)
	page.signIn(t, s.base, readToken)
	page.eval(t, `location.hash = '#/audit'`)
	page.waitFor(t, `document.querySelectorAll('#audit-list tr[data-audit-id]').length === 1`)
	require.Equal(t, "dlq.edit triage 1", page.text(t, ``, `(() => { const r = document.querySelector('#audit-list tr[data-audit-id]');
		return [r.dataset.action, r.querySelector('[data-actor]').dataset.actor, r.querySelector('[data-entries]').dataset.entries].join(' '); })()`))
	page.requireClean(t, s.base)
	requireNoTokens(t, b)
}
