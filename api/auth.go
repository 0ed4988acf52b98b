package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/uumhq/uum/config"
)

// scope is a set of permissions a token grants.
type scope int

const (
	scopeIngest scope = 1 << iota
	scopeRead
	scopeAdmin = scopeIngest | scopeRead
)

var scopeNames = map[scope]string{scopeIngest: "ingest", scopeRead: "read", scopeAdmin: "admin"}

// token is a configured bearer token. Only its hash is kept, so comparing
// takes the same time whatever the length of the presented token.
type token struct {
	sum   [sha256.Size]byte
	grant scope
	name  string // what the audit log records as the actor
}

func newTokens(cfg []config.Token) []token {
	grants := map[string]scope{"ingest": scopeIngest, "read": scopeRead, "admin": scopeAdmin}
	out := make([]token, 0, len(cfg))
	for i, t := range cfg {
		if t.Value == "" {
			continue // never let an empty token match
		}
		if t.Name == "" { // config.Load names every token; a literal config may not
			t.Name = t.Scope + "#" + strconv.Itoa(i+1)
		}
		out = append(out, token{sum: sha256.Sum256([]byte(t.Value)), grant: grants[t.Scope], name: t.Name})
	}
	return out
}

// grants returns the union of the scopes of the configured tokens equal to
// presented.
func (s *server) grants(presented string) scope {
	g, _ := s.identify(presented)
	return g
}

// identify returns the union of the scopes of the configured tokens equal
// to presented, and the name of the last of them. It compares against
// every token without branching on the result, so timing does not tell
// which one matched.
func (s *server) identify(presented string) (scope, string) {
	sum := sha256.Sum256([]byte(presented))
	g, idx := 0, -1
	for i, t := range s.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], t.sum[:])
		g |= subtle.ConstantTimeSelect(eq, int(t.grant), 0)
		idx = subtle.ConstantTimeSelect(eq, i, idx)
	}
	if idx < 0 {
		return 0, ""
	}
	return scope(g), s.tokens[idx].name
}

// actorKey is the context key of the name of the request's token.
type actorKey struct{}

// actor returns the name of the token r was authorised with: the actor
// the audit log records.
func actor(r *http.Request) string {
	name, _ := r.Context().Value(actorKey{}).(string)
	return name
}

// require serves h only to requests bearing a token that grants want.
func (s *server) require(want scope, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, msg := bearerToken(r.Header.Get("Authorization"))
		var (
			g    scope
			name string
		)
		if msg == "" {
			if g, name = s.identify(tok); g == 0 {
				msg = "unknown bearer token"
			}
		}
		if msg != "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "unauthorized", "", msg)
			return
		}
		if g&want != want {
			// RFC 6750: the token is fine, its scope is not enough.
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
			writeError(w, http.StatusForbidden, "forbidden", "", "token lacks the "+scopeNames[want]+" scope")
			return
		}
		if !checkQuery(w, r) {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, name)))
	})
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header, or returns why it cannot.
func bearerToken(header string) (tok, problem string) {
	if header == "" {
		return "", "missing bearer token"
	}
	scheme, tok, _ := strings.Cut(header, " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", `authorization header must be "Bearer <token>"`
	}
	return tok, ""
}

// whoami serves GET /v1/whoami: the scopes the presented token grants, so
// that a client (the console) offers only what the token may do, and its
// name, as the audit log records it.
func (s *server) whoami(w http.ResponseWriter, r *http.Request) {
	tok, _ := bearerToken(r.Header.Get("Authorization"))
	g := s.grants(tok)
	scopes := []string{}
	for _, sc := range []scope{scopeIngest, scopeRead, scopeAdmin} {
		if g&sc == sc {
			scopes = append(scopes, scopeNames[sc])
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"scopes": scopes, "name": actor(r)})
}

// WithConsole serves h, the web console, under GET /ui/ without a token:
// its files hold no data; its pages read the JSON API with the token the
// user types in.
func WithConsole(h http.Handler) Option { return func(s *server) { s.console = h } }
