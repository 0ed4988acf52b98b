package config

import "fmt"

// API configures the HTTP API.
type API struct {
	// Addr is the host:port the API listens on.
	Addr string `env:"UUM_API_ADDR" envDefault:"127.0.0.1:8080" bin:"api" desc:"Listen address of the HTTP API (host:port)."`
	// Tokens are the bearer tokens the API accepts; with none, every
	// authenticated request gets 401.
	Tokens []Token `env:"UUM_API_TOKENS" bin:"api" desc:"Comma-separated scope:token pairs, scope ingest, read or admin, token at least 16 characters; empty rejects every request."`
}

// Token is a bearer token and the scope it grants: "ingest", "read" or
// "admin".
type Token struct {
	Scope string
	Value string
}

// MinTokenLen is the shortest API token accepted.
const MinTokenLen = 16

// validateTokens never quotes a token: errors end up in logs.
func validateTokens(r *report, name string, tokens []Token) {
	for i, t := range tokens {
		entry := i + 1
		switch {
		case t.Scope == "":
			r.fail(name, fmt.Sprintf("entry %d must be scope:token", entry))
		case t.Scope != "ingest" && t.Scope != "read" && t.Scope != "admin":
			r.fail(name, fmt.Sprintf("invalid scope %q in entry %d: must be ingest, read or admin", t.Scope, entry))
		case len(t.Value) < MinTokenLen:
			r.fail(name, fmt.Sprintf("token in entry %d must be at least %d characters", entry, MinTokenLen))
		}
	}
}
