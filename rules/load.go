package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/uumhq/uum"
)

// Error is a problem in a counters file, at a line, in a field:
// "counters.yaml:12: counters[1].rules[0].op: unknown op ...".
type Error struct {
	File   string
	Line   int // 0 when the problem is the file itself
	Field  string
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	return b.String() + ": " + e.Reason
}

// Option is a constraint Load and Parse check beyond the file's own rules.
type Option func(*parser)

// MaxWindow refuses window counters longer than d, the retention of their
// minute buckets: a longer window would read buckets already deleted and
// silently under-count.
func MaxWindow(d time.Duration) Option {
	return func(p *parser) { p.maxWindow = d }
}

// Load reads and validates the counters file at path.
func Load(path string, opts ...Option) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Reason: err.Error()}
	}
	return Parse(path, data, opts...)
}

// Parse validates the counters file data, read from file (for errors). It
// returns the first problem as an *Error.
func Parse(file string, data []byte, opts ...Option) (*Set, error) {
	p := parser{file: file}
	for _, o := range opts {
		o(&p)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Reason: "empty file: want a top-level counters list"}
		}
		return nil, &Error{File: file, Reason: "invalid YAML: " + err.Error()}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.fail(root, "", "must be a mapping with a counters list")
	}
	var list *yaml.Node
	for k, v := range pairs(root) {
		if k.Value != "counters" {
			return nil, p.fail(k, k.Value, "unknown key (want counters)")
		}
		list = v
	}
	if list == nil {
		return nil, p.fail(root, "counters", "is required")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, p.fail(list, "counters", "must be a list")
	}
	var counters []*Counter
	seen := map[string]int{}
	for i, n := range list.Content {
		field := fmt.Sprintf("counters[%d]", i)
		c, err := p.counter(field, n)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[c.Name]; dup {
			return nil, p.fail(n, field+".counterName", fmt.Sprintf("duplicate counter name %q (first on line %d)", c.Name, line))
		}
		seen[c.Name] = n.Line
		counters = append(counters, c)
	}
	set := newSet(counters)
	set.file = file
	return set, nil
}

type parser struct {
	file      string
	maxWindow time.Duration // 0: no limit
}

func (p parser) fail(n *yaml.Node, field, reason string) *Error {
	return &Error{File: p.file, Line: n.Line, Field: field, Reason: reason}
}

// pairs iterates a mapping node's keys and values.
func pairs(n *yaml.Node) func(yield func(k, v *yaml.Node) bool) {
	return func(yield func(k, v *yaml.Node) bool) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !yield(n.Content[i], n.Content[i+1]) {
				return
			}
		}
	}
}

// counterKeys are the keys of a counter definition.
var counterKeys = []string{"counterName", "mode", "dimensions", "floorAtZero", "rules", "idempotency", "window", "transitionSafe", "entity"}

func (p parser) counter(field string, n *yaml.Node) (*Counter, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.fail(n, field, "must be a mapping")
	}
	fields := map[string]*yaml.Node{}
	for k, v := range pairs(n) {
		if !slices.Contains(counterKeys, k.Value) {
			return nil, p.fail(k, field+"."+k.Value, "unknown key (want one of "+strings.Join(counterKeys, ", ")+")")
		}
		fields[k.Value] = v
	}
	c := &Counter{}
	var err error
	if c.Name, err = p.str(field+".counterName", n, fields["counterName"]); err != nil {
		return nil, err
	}
	if verr := uum.ValidateName("", c.Name); verr != nil {
		var ve *uum.ValidationError
		errors.As(verr, &ve)
		return nil, p.fail(fields["counterName"], field+".counterName", fmt.Sprintf("bad counter name %q: %s", c.Name, ve.Reason))
	}
	if c.Mode, err = p.str(field+".mode", n, fields["mode"]); err != nil {
		return nil, err
	}
	if c.Mode != ModePersistent && c.Mode != ModeWindow {
		return nil, p.fail(fields["mode"], field+".mode", fmt.Sprintf("bad mode %q (want persistent or window)", c.Mode))
	}
	if c.Dimensions, err = p.dimensions(field+".dimensions", fields["dimensions"]); err != nil {
		return nil, err
	}
	if c.FloorAtZero, err = p.boolean(field+".floorAtZero", fields["floorAtZero"]); err != nil {
		return nil, err
	}
	if c.TransitionSafe, err = p.boolean(field+".transitionSafe", fields["transitionSafe"]); err != nil {
		return nil, err
	}
	if c.Entity, err = p.dimensions(field+".entity", fields["entity"]); err != nil {
		return nil, err
	}
	if v := fields["entity"]; v != nil && !c.TransitionSafe {
		return nil, p.fail(v, field+".entity", "only transition-safe counters have an entity (add transitionSafe: true)")
	}
	if c.Rules, err = p.rules(field+".rules", n, fields["rules"]); err != nil {
		return nil, err
	}
	if err := p.idempotency(field+".idempotency", fields["idempotency"]); err != nil {
		return nil, err
	}
	return c, p.mode(field, n, c, fields)
}

// mode checks the keys that depend on the mode.
func (p parser) mode(field string, n *yaml.Node, c *Counter, fields map[string]*yaml.Node) error {
	w := fields["window"]
	if c.Mode == ModePersistent {
		if w != nil {
			return p.fail(w, field+".window", "only window counters have a window")
		}
		return nil
	}
	for _, k := range []string{"dimensions", "floorAtZero", "transitionSafe", "entity"} {
		if v := fields[k]; v != nil {
			return p.fail(v, field+"."+k, "window counters count per org_id and platform-wide; they take no "+k)
		}
	}
	for i, r := range c.Rules {
		if r.Delta < 0 {
			return p.fail(fields["rules"].Content[i], fmt.Sprintf("%s.rules[%d].op", field, i), "window counters only count (op increment)")
		}
	}
	if w == nil {
		return p.fail(n, field+".window", "is required for a window counter (e.g. 1h)")
	}
	d, err := time.ParseDuration(w.Value)
	if err != nil || w.Kind != yaml.ScalarNode {
		return p.fail(w, field+".window", fmt.Sprintf("bad duration %q (e.g. 1h, 90m)", w.Value))
	}
	if d < time.Minute || d%time.Minute != 0 {
		return p.fail(w, field+".window", fmt.Sprintf("must be whole minutes, at least 1m, got %s", w.Value))
	}
	if p.maxWindow > 0 && d > p.maxWindow {
		return p.fail(w, field+".window", fmt.Sprintf(
			"%s is longer than the minute buckets are kept (UUM_WINDOW_RETENTION=%s): it would silently under-count; shorten the window or raise the retention",
			w.Value, shortDuration(p.maxWindow)))
	}
	c.Window = d
	return nil
}

// boolean decodes an optional true/false field.
func (p parser) boolean(field string, v *yaml.Node) (bool, error) {
	var b bool
	if v == nil {
		return false, nil
	}
	if err := v.Decode(&b); err != nil || v.Tag != "!!bool" {
		return false, p.fail(v, field, "must be true or false")
	}
	return b, nil
}

// str decodes a required string field of parent.
func (p parser) str(field string, parent, v *yaml.Node) (string, error) {
	if v == nil {
		return "", p.fail(parent, field, "is required")
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		return "", p.fail(v, field, "must be a string")
	}
	return v.Value, nil
}

func (p parser) dimensions(field string, v *yaml.Node) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, p.fail(v, field, "must be a list of dimension keys")
	}
	var out []string
	for i, d := range v.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if d.Kind != yaml.ScalarNode || d.Tag != "!!str" || d.Value == "" || len(d.Value) > uum.MaxDimensionKeyLen {
			return nil, p.fail(d, f, fmt.Sprintf("must be a dimension key of 1-%d characters", uum.MaxDimensionKeyLen))
		}
		if slices.Contains(out, d.Value) {
			return nil, p.fail(d, f, fmt.Sprintf("duplicate dimension %q", d.Value))
		}
		out = append(out, d.Value)
	}
	slices.Sort(out)
	return out, nil
}

var ruleKeys = []string{"on", "op"}

func (p parser) rules(field string, parent, v *yaml.Node) ([]Rule, error) {
	if v == nil {
		return nil, p.fail(parent, field, "is required: at least one rule")
	}
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		return nil, p.fail(v, field, "must be a non-empty list of {on, op}")
	}
	var out []Rule
	for i, r := range v.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if r.Kind != yaml.MappingNode {
			return nil, p.fail(r, f, "must be a mapping {on, op}")
		}
		fields := map[string]*yaml.Node{}
		for k, val := range pairs(r) {
			if !slices.Contains(ruleKeys, k.Value) {
				return nil, p.fail(k, f+"."+k.Value, "unknown key (want on, op)")
			}
			fields[k.Value] = val
		}
		on, err := p.str(f+".on", r, fields["on"])
		if err != nil {
			return nil, err
		}
		if err := uum.ValidateName("", on); err != nil {
			return nil, p.fail(fields["on"], f+".on", fmt.Sprintf("bad event type %q", on))
		}
		op, err := p.str(f+".op", r, fields["op"])
		if err != nil {
			return nil, err
		}
		var delta int64
		switch op {
		case "increment":
			delta = 1
		case "decrement":
			delta = -1
		default:
			return nil, p.fail(fields["op"], f+".op", fmt.Sprintf("unknown op %q (want increment or decrement)", op))
		}
		for j, prev := range out {
			if prev.On == on {
				return nil, p.fail(fields["on"], f+".on", fmt.Sprintf("event type %q already has a rule (rules[%d])", on, j))
			}
		}
		out = append(out, Rule{On: on, Delta: delta})
	}
	return out, nil
}

// idempotency checks the seed's idempotency block: ids are always
// required and global, so anything else would promise what uum does not do.
func (p parser) idempotency(field string, v *yaml.Node) error {
	if v == nil {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return p.fail(v, field, "must be a mapping {requireEventId, scope}")
	}
	for k, val := range pairs(v) {
		switch k.Value {
		case "requireEventId":
			var b bool
			if err := val.Decode(&b); err != nil || val.Tag != "!!bool" || !b {
				return p.fail(val, field+".requireEventId", "must be true: every tracked event has an id")
			}
		case "scope":
			if val.Value != "globalEventId" {
				return p.fail(val, field+".scope", fmt.Sprintf("must be globalEventId, got %q", val.Value))
			}
		default:
			return p.fail(k, field+"."+k.Value, "unknown key (want requireEventId, scope)")
		}
	}
	return nil
}

// shortDuration writes d as an operator would: 168h, not 168h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
