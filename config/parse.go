package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/caarlos0/env/v11"
)

// parsers convert the values whose syntax env does not know.
var parsers = map[reflect.Type]env.ParserFunc{
	reflect.TypeFor[bool]():     parseBool,
	reflect.TypeFor[[]string](): func(s string) (any, error) { return splitList(s), nil },
	reflect.TypeFor[[]Token]():  parseTokens,
}

// parse fills cfg from environ and returns the variables whose values did
// not convert to their field's type; validate reports them.
func parse(cfg *Config, environ map[string]string) (map[string]bool, error) {
	unparsed := make(map[string]bool)
	opts := env.Options{Environment: environ, FuncMap: parsers}
	// One component at a time: a ParseError names only the Go field, and
	// field names repeat across components (Redis.URL, Database.URL).
	for _, component := range reflect.ValueOf(cfg).Elem().Fields() {
		err := env.ParseWithOptions(component.Addr().Interface(), opts)
		invert(component)
		if err == nil {
			continue
		}
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return nil, fmt.Errorf("parse environment: %w", err)
		}
		for _, e := range agg.Errors {
			var pe env.ParseError
			if !errors.As(e, &pe) {
				return nil, fmt.Errorf("parse environment: %w", e)
			}
			f, _ := component.Type().FieldByName(pe.Name)
			unparsed[varName(f)] = true
		}
	}
	return unparsed, nil
}

// invert flips the bool fields tagged invert:"true": a field whose zero
// value must mean "on" (Events.Disabled) is read from a variable that says
// "enabled".
func invert(component reflect.Value) {
	for f, v := range component.Fields() {
		if f.Tag.Get("invert") == "true" {
			v.SetBool(!v.Bool())
		}
	}
}

// parseBool accepts true/false, 1/0 and yes/no in any case.
func parseBool(s string) (any, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return nil, fmt.Errorf("invalid boolean %q", s)
}

// parseTokens splits [name=]scope:token entries; validate checks them, so
// that its errors can say which entry is wrong without echoing the token.
// An entry without a colon becomes a token without a scope; one without a
// name is named "<scope>#<entry>".
func parseTokens(s string) (any, error) {
	var tokens []Token
	for i, entry := range splitList(s) {
		scope, value, found := strings.Cut(entry, ":")
		if !found {
			scope, value = "", entry
		}
		name, scope, named := strings.Cut(scope, "=")
		if !named {
			name, scope = "", name
		}
		scope, name = strings.TrimSpace(scope), strings.TrimSpace(name)
		if !named {
			name = scope + "#" + strconv.Itoa(i+1)
		}
		tokens = append(tokens, Token{Name: name, Scope: scope, Value: strings.TrimSpace(value)})
	}
	return tokens, nil
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
