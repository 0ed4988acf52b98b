// Package console is uum's web console: an operator's and analyst's view
// of the pipeline, the unique users, the counters and the dead letters,
// served by cmd/api under /ui/.
//
// It is static files embedded in the binary, with no build step: plain ES
// modules and the vendored uPlot charts (assets/vendor/uplot/VERSION).
// The pages hold no data and no token. They read the JSON API, and only
// it, with the bearer token the user types once, which stays in the tab's
// sessionStorage and goes out in the Authorization header: never in a URL,
// so never in a log. The API decides what a token may do; the pages only
// hide the actions a read token would be refused.
//
// Every response carries a strict Content-Security-Policy: scripts,
// styles and fetches from the API's own origin only, no inline script or
// style, Trusted Types required for DOM sinks, and no framing.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every console response. uPlot
// styles its elements through the CSSOM (element.style), which
// style-src does not govern; nothing uses a style attribute or element.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self'; connect-src 'self'; font-src 'self'; manifest-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// Handler serves the console's files under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // a constant path into the embedded tree cannot fail
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		// The files change with the binary: revalidate, and since the
		// embedded files carry no modification time, refetch.
		h.Set("Cache-Control", "no-cache")
		if strings.HasSuffix(r.URL.Path, "/") && r.URL.Path != Prefix {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
}
