package config

import (
	"fmt"
	"strconv"
	"strings"
)

// API configures the HTTP API.
type API struct {
	// Addr is the host:port the API listens on.
	Addr string `env:"UUM_API_ADDR" envDefault:"127.0.0.1:8080" bin:"api" desc:"Listen address of the HTTP API (host:port)."`
	// Tokens are the bearer tokens the API accepts; with none, every
	// authenticated request gets 401.
	Tokens []Token `env:"UUM_API_TOKENS" bin:"api" desc:"Comma-separated [name=]scope:token entries, scope ingest, read or admin, token at least 16 characters, name (what the audit log records; default scope#entry) letters, digits and ._@- ; empty rejects every request."`
}

// Token is a bearer token and the scope it grants: "ingest", "read" or
// "admin". Name is what the audit log records as the actor of what the
// token does: given as name=scope:token, else "<scope>#<entry>" (its
// position in UUM_API_TOKENS, from 1).
type Token struct {
	Name  string
	Scope string
	Value string
}

// MaxTokenNameLen is the longest token name accepted.
const MaxTokenNameLen = 64

// MinTokenLen is the shortest API token accepted.
const MinTokenLen = 16

// validateTokens never quotes a token: errors end up in logs.
func validateTokens(r *report, name string, tokens []Token) {
	named := map[string]int{}
	for i, t := range tokens {
		entry := i + 1
		first, dup := named[t.Name]
		switch {
		case t.Scope == "":
			r.fail(name, fmt.Sprintf("entry %d must be scope:token", entry))
		case t.Scope != "ingest" && t.Scope != "read" && t.Scope != "admin":
			r.fail(name, fmt.Sprintf("invalid scope %q in entry %d: must be ingest, read or admin", t.Scope, entry))
		case len(t.Value) < MinTokenLen:
			r.fail(name, fmt.Sprintf("token in entry %d must be at least %d characters", entry, MinTokenLen))
		case t.Name != t.Scope+"#"+strconv.Itoa(entry) && !validTokenName(t.Name):
			r.fail(name, fmt.Sprintf("invalid name %q in entry %d: must be 1-%d letters, digits, '.', '_', '@' or '-'", t.Name, entry, MaxTokenNameLen))
		case dup:
			r.fail(name, fmt.Sprintf("name %q of entry %d is the name of entry %d: the audit log must tell them apart", t.Name, entry, first))
		}
		if !dup {
			named[t.Name] = entry
		}
	}
}

// validTokenName reports whether s may name a token: no separator of
// UUM_API_TOKENS, and no '#', which only the default names have.
func validTokenName(s string) bool {
	if s == "" || len(s) > MaxTokenNameLen {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("._@-", c)) {
			return false
		}
	}
	return true
}
