package docstest

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/config"
)

// packages returns every directory of the module that holds Go files,
// relative to the root ("uum" for the root itself).
func packages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel == "." {
			rel = "uum"
		}
		if !slices.Contains(dirs, rel) {
			dirs = append(dirs, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return dirs
}

var mapRowRE = regexp.MustCompile("(?m)^\\| `([^`]+)`")

// TestPackageMapListsEveryPackage keeps the package map of
// docs/architecture.md whole: a row for every package, and no row for a
// package that is gone.
func TestPackageMapListsEveryPackage(t *testing.T) {
	t.Parallel()
	pm, ok := section(readDoc(t, "docs/architecture.md"), "## Package map")
	require.True(t, ok, "docs/architecture.md has a Package map section")
	var rows []string
	for _, m := range mapRowRE.FindAllStringSubmatch(pm, -1) {
		rows = append(rows, m[1])
	}
	pkgs := packages(t)
	for _, p := range pkgs {
		require.Contains(t, rows, p, "docs/architecture.md's package map has no row for package %s", p)
	}
	for _, r := range rows {
		require.Contains(t, pkgs, r, "docs/architecture.md's package map lists %s, which is not a package", r)
	}
}

var varRowRE = regexp.MustCompile("(?m)^\\| `(UUM_[A-Z0-9_]+)` \\| (.*) \\| (.*) \\|$")

// TestConfigTableListsEveryVariable keeps the configuration table of
// docs/operations.md what config.Vars says: every variable, its default
// and its description, and no variable the code does not read.
func TestConfigTableListsEveryVariable(t *testing.T) {
	t.Parallel()
	cfg, ok := section(readDoc(t, "docs/operations.md"), "## Configuration")
	require.True(t, ok, "docs/operations.md has a Configuration section")
	documented := map[string]string{}
	for _, m := range varRowRE.FindAllStringSubmatch(cfg, -1) {
		documented[m[1]] = "| `" + m[1] + "` | " + m[2] + " | " + m[3] + " |"
	}
	for _, v := range config.Vars() {
		def := "(empty)"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		want := "| `" + v.Name + "` | " + def + " | " + v.Description + " |"
		require.Equal(t, want, documented[v.Name], "the row of %s in docs/operations.md's configuration table", v.Name)
		delete(documented, v.Name)
	}
	require.Empty(t, documented, "docs/operations.md documents variables that config.Vars does not have")
}
