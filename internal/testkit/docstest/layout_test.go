package docstest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// kitPrefix is where the test kits live: imported only from _test.go
// files, from other kits and from the test command cmd/chaos.
const kitPrefix = module + "/internal/testkit/"

// Folder tiers of the layout, bottom up: the root and internal/'s leaves,
// the adapters and services, the wiring in cmd/. The test kits have no
// tier: only tests import them.
const (
	tierLeaf = iota
	tierService
	tierWiring
	tierKit
)

// tier returns the folder tier of a module package.
func tier(path string) int {
	rel := short(path)
	switch {
	case strings.HasPrefix(path, kitPrefix):
		return tierKit
	case rel == "uum" || strings.HasPrefix(rel, "internal/"):
		return tierLeaf
	case strings.HasPrefix(rel, "cmd/"):
		return tierWiring
	}
	return tierService
}

// backwardImports returns the imports of the module's non-test files that
// run from a lower folder tier to a higher one ("a -> b"): a leaf that
// imports a service, a service that imports the wiring.
func backwardImports(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		if !ours(p.ImportPath) || tier(p.ImportPath) == tierKit {
			continue
		}
		for _, imp := range p.Imports {
			if ours(imp) && tier(imp) != tierKit && tier(imp) > tier(p.ImportPath) {
				out = append(out, short(p.ImportPath)+" -> "+short(imp))
			}
		}
	}
	return out
}

// TestLayout keeps the folders showing the architecture: no non-test file
// outside internal/testkit/ and cmd/chaos/ imports a test kit; the other
// packages under internal/ are leaves that import only the standard
// library; no import runs from a lower folder tier to a higher one.
func TestLayout(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	standard := map[string]bool{}
	for _, p := range pkgs {
		standard[p.ImportPath] = p.Standard
	}
	for _, p := range pkgs {
		rel := short(p.ImportPath)
		if !ours(p.ImportPath) {
			continue
		}
		testOnly := strings.HasPrefix(p.ImportPath, kitPrefix) || rel == "cmd/chaos" || strings.HasPrefix(rel, "cmd/chaos/")
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, kitPrefix) {
				require.True(t, testOnly, "%s imports the test kit %s outside a _test.go file", rel, short(imp))
			}
			if strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(p.ImportPath, kitPrefix) {
				require.True(t, standard[imp], "%s is a leaf of internal/ and imports %s, not the standard library", rel, imp)
			}
		}
	}
	require.Empty(t, backwardImports(pkgs), "imports from a lower folder tier to a higher one")
}
