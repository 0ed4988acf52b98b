package promstats_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/cmd/internal/promstats"
	"github.com/uumhq/uum/internal/testkit/promtooltest"
)

// grafanaDir holds the Grafana dashboard of uum's Prometheus metrics, an
// artefact operators import as it is; its check lives here, with the
// catalogue of the series /metrics serves.
var grafanaDir = filepath.Join("..", "..", "..", "deploy", "grafana")

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard keeps every query of the dashboard valid PromQL
// (promtool checks it) on series /metrics serves.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(grafanaDir, "uum.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.Panels)
	// Every query becomes a recording rule, for promtool to parse; Grafana's
	// interval variables take a value.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for j, p := range d.Panels {
		require.Equal(t, "${datasource}", p.Datasource.UID, "%s uses the dashboard's data source", p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for i, tg := range p.Targets {
			require.Empty(t, promstats.Unserved(tg.Expr), "panel %q refers to series /metrics does not serve", p.Title)
			expr := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m").Replace(tg.Expr)
			fmt.Fprintf(&rules, "      - record: panel_%d_%d\n        expr: %q\n", j, i, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules.String()), 0o600))
	out, ok := promtooltest.Run(t, "", "check", "rules", file)
	require.True(t, ok, "promtool check rules on the dashboard's queries:\n%s", out)
}
