package promstats_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/uumhq/uum/cmd/internal/promstats"
	"github.com/uumhq/uum/internal/testkit/promtooltest"
)

// prometheusDir holds uum's Prometheus alerting rules, beside the DataDog
// monitors of deploy/datadog, and the recording rules that keep the
// deprecated metric names: artefacts operators load as they are. These
// tests check them with promtool, run their unit tests, and keep them in
// step with the metrics /metrics serves and with the DataDog monitors.
var prometheusDir = filepath.Join("..", "..", "..", "deploy", "prometheus")

// ruleFiles are the rule files and their unit tests, in prometheusDir.
var ruleFiles = map[string]string{
	"uum.rules.yml":        "uum.rules.test.yml",
	"uum-compat.rules.yml": "uum-compat.rules.test.yml",
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	for name, testName := range ruleFiles {
		rules, tests := filepath.Join(prometheusDir, name), filepath.Join(prometheusDir, testName)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, ok := promtooltest.Run(t, "", "check", "rules", rules)
			require.True(t, ok, "promtool check rules:\n%s", out)
			// promtool reads a test's rule_files relative to the test file.
			out, ok = promtooltest.Run(t, "", "test", "rules", tests)
			require.True(t, ok, "promtool test rules:\n%s", out)
			for _, expr := range exprs(t, rules) {
				require.Empty(t, promstats.Unserved(expr), "%s refers to series /metrics does not serve", rules)
			}
		})
	}
}

// exprs returns the expressions of a rule file.
func exprs(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// alertFor maps each DataDog monitor to the alert with its condition.
var alertFor = map[string]string{
	"queue_depth.json":     "UumQueueDepthHigh",
	"queue_lag.json":       "UumQueueLagHigh",
	"drain_failure.json":   "UumDrainFailed",
	"dlq_growth.json":      "UumDeadLettersGrowing",
	"reconcile_drift.json": "UumReconcileDrift",
}

// TestSameConditionsAsDataDog: every DataDog monitor has its alert here,
// with the same threshold.
func TestSameConditionsAsDataDog(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(prometheusDir, "uum.rules.yml"))
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	alerts := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r.Expr
		}
	}
	monitors, err := filepath.Glob(filepath.Join(datadogDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, monitors, len(alertFor))
	threshold := regexp.MustCompile(`> (\d+(\.\d+)?)\s*$`)
	for _, path := range monitors {
		name, ok := alertFor[filepath.Base(path)]
		require.True(t, ok, "DataDog monitor %s has no Prometheus alert", path)
		expr, ok := alerts[name]
		require.True(t, ok, "no alert %s", name)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var m struct {
			Options struct {
				Thresholds struct {
					Critical float64 `json:"critical"`
				} `json:"thresholds"`
			} `json:"options"`
		}
		require.NoError(t, json.Unmarshal(raw, &m))
		got := threshold.FindStringSubmatch(expr)
		require.NotNil(t, got, "%s must end with > threshold: %s", name, expr)
		v, err := strconv.ParseFloat(got[1], 64)
		require.NoError(t, err)
		require.Equal(t, m.Options.Thresholds.Critical, v, "%s and %s", name, path)
	}
}
