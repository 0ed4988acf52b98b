// Package config reads the service configuration from environment variables
// once, at start, into one typed sub-struct per component. Load checks every
// variable and reports all the bad ones together, each error naming the
// variable and the value it rejected, so an operator fixes a deployment in
// one round. Vars lists the variables for the README configuration table.
package config

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Config is the whole service configuration. Each field is handed to the
// constructor of the component it is named for.
//
// The fields of the components carry their variable in an env tag, its
// default in envDefault, its description in desc and, when only one binary
// reads it, that binary in bin ("api" or "processor"); Vars reads them there.
type Config struct {
	Redis      Redis
	Database   Database
	Log        Log
	Processor  Processor
	Cache      Cache
	Events     Events
	API        API
	Statsd     Statsd
	Operations Operations
	Counters   Counters
	Active     ActiveUsers
}

// Log configures the process log.
type Log struct {
	// Level is the least severe level logged; the zero value is info.
	Level slog.Level `env:"UUM_LOG_LEVEL" envDefault:"info" desc:"Least severe log level written: debug, info, warn or error."`
}

// The binaries that read the configuration, for LoadFor and VarsFor.
const (
	BinAPI       = "api"
	BinProcessor = "processor"
)

// Var describes one configuration variable.
type Var struct {
	Name        string
	Default     string
	Description string
	// Bin is the only binary that reads the variable; empty means both.
	Bin string
}

// Vars returns every variable Load reads, in Config field order.
func Vars() []Var {
	var vars []Var
	for component := range reflect.TypeFor[Config]().Fields() {
		for f := range component.Type.Fields() {
			if name := varName(f); name != "" {
				vars = append(vars, Var{Name: name, Default: f.Tag.Get("envDefault"), Description: f.Tag.Get("desc"), Bin: f.Tag.Get("bin")})
			}
		}
	}
	return vars
}

// VarsFor returns the variables the binary bin (BinAPI or BinProcessor)
// reads, in Config field order.
func VarsFor(bin string) []Var {
	var vars []Var
	for _, v := range Vars() {
		if v.Bin == "" || v.Bin == bin {
			vars = append(vars, v)
		}
	}
	return vars
}

// IsVar reports whether name is a variable of either binary.
func IsVar(name string) bool {
	return slices.ContainsFunc(Vars(), func(v Var) bool { return v.Name == name })
}

// varName returns the variable of a component field, or "" if it has none.
func varName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return name
}

// Error reports a variable with a bad value. Load returns one per problem,
// joined with errors.Join.
type Error struct {
	// Var is the variable, e.g. "UUM_BATCH_SIZE".
	Var string
	// Value is the rejected value, trimmed and with URL credentials hidden.
	// It is empty when Reason itself quotes the bad item of a list, or when
	// the value is secret.
	Value string
	// Reason says what a good value looks like.
	Reason string
}

// Error returns `VAR: reason, got "value"`, or `VAR: reason` without a Value.
func (e *Error) Error() string {
	if e.Value == "" {
		return e.Var + ": " + e.Reason
	}
	return fmt.Sprintf("%s: %s, got %q", e.Var, e.Reason, e.Value)
}

// Load reads and checks the configuration. lookup is os.LookupEnv in
// production and a fake in tests; it must tell unset from empty because an
// empty UUM_STATSD_ADDR disables metrics while an unset one means the
// default. Every other variable set to blanks counts as unset, and values
// are trimmed of surrounding blanks.
//
// If any variable is bad, Load returns the zero Config and every problem as
// an *Error, sorted by variable name and joined with errors.Join, so the
// error text has one line per problem.
func Load(lookup func(string) (string, bool)) (Config, error) {
	return load(lookup, Vars())
}

// LoadFor is Load for the binary bin (BinAPI or BinProcessor): it reads
// and checks only the variables that binary reads, leaving the fields of
// the others at their defaults, so a bad value meant for the other binary
// does not stop this one.
func LoadFor(bin string, lookup func(string) (string, bool)) (Config, error) {
	return load(lookup, VarsFor(bin))
}

func load(lookup func(string) (string, bool), vars []Var) (Config, error) {
	environ := make(map[string]string) // never nil: nil makes env read os.Environ
	for _, v := range vars {
		if s, ok := lookup(v.Name); ok && strings.TrimSpace(s) != "" {
			environ[v.Name] = strings.TrimSpace(s)
		}
	}
	var cfg Config
	unparsed, err := parse(&cfg, environ)
	if err != nil {
		return Config{}, err
	}
	// env substitutes the default for an empty value; undo that here.
	if s, ok := lookup(statsdAddr); ok && strings.TrimSpace(s) == "" {
		cfg.Statsd.Addr = ""
	}
	r := &report{environ: environ, unparsed: unparsed}
	cfg.validate(r)
	if err := r.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks a Config built in code as Load checks the environment,
// and returns every problem the same way: one *Error per problem, naming
// the variable of the field. Call it after WithDefaults, since a zero
// field is not valid on its own.
func (c Config) Validate() error {
	environ := make(map[string]string) // the values the errors show
	for _, component := range reflect.ValueOf(c).Fields() {
		for f, v := range component.Fields() {
			switch name := varName(f); {
			case name == "" || f.Type == reflect.TypeFor[[]Token]():
				// Tokens are secret; their errors never show them.
			case f.Type == reflect.TypeFor[[]string]():
				environ[name] = strings.Join(v.Interface().([]string), ",")
			default:
				environ[name] = fmt.Sprint(v.Interface())
			}
		}
	}
	r := &report{environ: environ}
	c.validate(r)
	return r.err()
}

// WithDefaults returns c with each zero field set to its documented
// default, so that a Config built in code, config.Config{} included, means
// what Load reads from an empty environment. Fields whose zero value has a
// meaning of its own keep it: empty lists (Events.Names allows any name;
// no API.Tokens rejects every request), an empty Statsd.Addr (no metrics)
// and Processor.MaxRetry 0 (never retry).
func (c Config) WithDefaults() Config {
	d := defaultConfig()
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(d)
	for ci := range dst.NumField() {
		for f, v := range dst.Field(ci).Fields() {
			if f.Tag.Get("envDefault") != "" && f.Tag.Get("keepzero") == "" && v.IsZero() {
				v.Set(src.Field(ci).FieldByIndex(f.Index))
			}
		}
	}
	return c
}

// defaultConfig is the Config of an empty environment.
var defaultConfig = sync.OnceValue(func() Config {
	var d Config
	if _, err := parse(&d, map[string]string{}); err != nil {
		panic(fmt.Sprintf("config: bad envDefault tag: %v", err)) // a bug in this file, caught by its tests
	}
	return d
})
