package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/console"
)

func get(p string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	console.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
	return rec
}

func TestHandler(t *testing.T) {
	t.Parallel()

	t.Run("ServesThePageWithAStrictPolicy", func(t *testing.T) {
		t.Parallel()
		res := get("/ui/")
		require.Equal(t, http.StatusOK, res.Code)
		require.Contains(t, res.Body.String(), `<script type="module" src="js/app.js">`)
		for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options"} {
			require.NotEmpty(t, res.Header().Get(h), h)
		}
		csp := res.Header().Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self';")
		require.Contains(t, csp, "style-src 'self';")
		require.NotContains(t, csp, "unsafe-", "no inline script or style, no eval")
		require.Contains(t, csp, "require-trusted-types-for 'script'")
	})

	t.Run("JavaScriptHasItsType", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/ui/js/app.js", "/ui/vendor/uplot/uPlot.iife.min.js"} {
			res := get(p)
			require.Equal(t, http.StatusOK, res.Code, p)
			require.Equal(t, "text/javascript; charset=utf-8", res.Header().Get("Content-Type"), p)
		}
	})

	t.Run("NoDirectoryListing", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, http.StatusNotFound, get("/ui/js/").Code)
	})
}

// assets walks the embedded files as the handler serves them.
func assets(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS("assets"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path.Join("assets", p))
		out[p] = string(b)
		return err
	}))
	return out
}

// TestAssetsAreSelfContained checks what the CSP relies on and the
// browser test cannot see in one run: no inline script or style in the
// page, no HTML parsed from strings in our scripts, and every file the
// page and the modules load is embedded.
func TestAssetsAreSelfContained(t *testing.T) {
	t.Parallel()
	files := assets(t)
	page := files["index.html"]
	require.NotRegexp(t, `<script(\s[^>]*)?>[^<\s]`, page, "inline script")
	require.NotContains(t, page, "<style")
	require.NotRegexp(t, `\sstyle=`, page)
	require.NotRegexp(t, `\son[a-z]+=`, page, "inline event handler")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(page, -1) {
		require.Contains(t, files, m[1], "index.html loads %s", m[1])
	}
	importRE := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	for name, src := range files {
		if !strings.HasPrefix(name, "js/") {
			continue
		}
		for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'", "http://", "https://"} {
			require.NotContains(t, src, banned, "%s uses %s", name, banned)
		}
		for _, m := range importRE.FindAllStringSubmatch(src, -1) {
			require.Contains(t, files, "js/"+m[1], "%s imports %s", name, m[1])
		}
	}
}

// TestVendoredUPlotIsTheReleasedFile checks the vendored files against
// the hashes VERSION records from the npm tarball.
func TestVendoredUPlotIsTheReleasedFile(t *testing.T) {
	t.Parallel()
	files := assets(t)
	version := files["vendor/uplot/VERSION"]
	for _, name := range []string{"uPlot.iife.min.js", "uPlot.min.css", "LICENSE"} {
		sum := sha256.Sum256([]byte(files["vendor/uplot/"+name]))
		require.Regexp(t, regexp.QuoteMeta(name)+`\s+sha256 `+hex.EncodeToString(sum[:]), version, name)
	}
	require.True(t, strings.HasPrefix(files["vendor/uplot/uPlot.iife.min.js"], "/*! https://github.com/leeoniya/uPlot (v1.6.32) */"))
}
