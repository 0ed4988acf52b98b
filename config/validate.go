package config

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report collects the problems validate finds.
type report struct {
	environ  map[string]string
	unparsed map[string]bool
	errs     []*Error
}

// check reports name with reason unless ok holds and its value parsed; a
// value that did not parse left its field zero, so ok says nothing then.
func (r *report) check(name string, ok bool, reason string) {
	r.checkShown(name, r.environ[name], ok, reason)
}

// checkURL is check for a URL, whose credentials the error hides.
func (r *report) checkURL(name string, ok bool, reason string) {
	r.checkShown(name, redact(r.environ[name]), ok, reason)
}

func (r *report) checkShown(name, shown string, ok bool, reason string) {
	if ok && !r.unparsed[name] {
		return
	}
	r.errs = append(r.errs, &Error{Var: name, Value: shown, Reason: reason})
}

// fail reports a problem with one item of a list; reason quotes the item.
func (r *report) fail(name, reason string) {
	r.errs = append(r.errs, &Error{Var: name, Reason: reason})
}

// err joins the problems sorted by variable, keeping the order within one.
func (r *report) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(r.errs, func(a, b *Error) int { return strings.Compare(a.Var, b.Var) })
	errs := make([]error, len(r.errs))
	for i, e := range r.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Reasons shared by several variables.
const (
	positiveInt   = "must be a positive integer"
	atLeastSecond = "must be a duration of at least 1s"
	hostPort      = "must be host:port"
)

func (c Config) validate(r *report) {
	if c.Redis.Cluster {
		_, err := c.Redis.ClusterOptions()
		r.checkURL("UUM_REDIS_URL", err == nil, "with UUM_REDIS_CLUSTER=true, must be a redis:// or rediss:// cluster URL (redis://host1:port1?addr=host2:port2), database 0 only and only go-redis's cluster URL options")
	} else {
		_, err := c.Redis.Options()
		r.checkURL("UUM_REDIS_URL", err == nil, "must be a redis:// or rediss:// URL with a host, an optional database number 0-15 and only go-redis's URL options")
	}
	r.check("UUM_REDIS_CLUSTER", true, "must be true, false, 1, 0, yes or no")
	r.check("UUM_PUSH_WAIT_REPLICAS", c.Redis.PushWaitReplicas >= 0 && c.Redis.PushWaitReplicas <= 16, "must be an integer from 0 to 16")
	r.checkURL("UUM_DATABASE_URL", validURL(c.Database.URL, "postgres", "postgresql"), "must be a postgres:// or postgresql:// URL")
	r.checkURL("UUM_DATABASE_READ_URL", c.Database.ReadURL == "" || validURL(c.Database.ReadURL, "postgres", "postgresql"), "must be a postgres:// or postgresql:// URL")
	r.check("UUM_DATABASE_READ_TIMEOUT", c.Database.ReadTimeout > 0, "must be a positive duration")
	r.check("UUM_DATABASE_PARTITIONS", c.Database.Partitions >= 1 && c.Database.Partitions <= 1024, "must be an integer from 1 to 1024")
	r.check("UUM_DATABASE_SCHEMA", c.Database.Schema == "" || schemaName.MatchString(c.Database.Schema) && !strings.HasPrefix(c.Database.Schema, "pg_"),
		"must be a lowercase identifier (a-z, 0-9, _; not starting with a digit or pg_; at most 63 characters)")
	// slog's parser, which env uses, also takes offsets like "info+2",
	// which the README does not promise.
	level := strings.ToLower(r.environ["UUM_LOG_LEVEL"])
	r.check("UUM_LOG_LEVEL", slices.Contains([]string{"", "debug", "info", "warn", "error"}, level), "must be debug, info, warn or error")
	c.Processor.validate(r)
	r.check("UUM_BUFFER_SHARDS", c.Redis.BufferShards > 0 && c.Redis.BufferShards <= MaxBufferShards, "must be an integer from 1 to 1024")
	r.check("UUM_CACHE_TTL", c.Cache.TTL >= time.Second, atLeastSecond)
	r.check("UUM_CACHE_BUCKETS", c.Cache.Buckets > 0 && c.Cache.Buckets <= 1<<24, "must be an integer from 1 to 16777216")
	c.Events.validate(r)
	r.check("UUM_API_ADDR", validHostPort(c.API.Addr), hostPort)
	validateTokens(r, "UUM_API_TOKENS", c.API.Tokens)
	r.check(statsdAddr, c.Statsd.Addr == "" || validHostPort(c.Statsd.Addr), hostPort)
	c.Operations.validate(r)
	c.Counters.validate(r)
	c.Active.validate(r)
}

// schemaName is an identifier Postgres takes unquoted, so the schema is
// the same whether or not an operator quotes it in psql.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validURL reports whether s is an absolute URL with one of schemes.
func validURL(s string, schemes ...string) bool {
	u, err := url.Parse(s)
	return err == nil && slices.Contains(schemes, u.Scheme) && u.Opaque == ""
}

// validHostPort reports whether s is host:port with a numeric port; the
// host may be empty to listen on every interface.
func validHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// redact hides credentials so errors can be logged: everything between
// "://" and the last "@", since a password may be unescaped or given as the
// user name, and a password query parameter.
func redact(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if scheme, _, found := strings.Cut(s[:at], "://"); found {
			s = scheme + "://xxxxx" + s[at:]
		} else {
			s = "xxxxx" + s[at:]
		}
	}
	base, query, _ := strings.Cut(s, "?")
	q, _ := url.ParseQuery(query)
	if !q.Has("password") {
		return s
	}
	q.Set("password", "xxxxx")
	return base + "?" + q.Encode()
}
