package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/store"
)

// File is a checkpoint open for reading. Its rows are read in one pass,
// in the order of store.CheckpointRows' fields; the count and checksum
// are checked at the end of the file, so a consumer that commits only
// after every iterator ended without error commits a whole, intact file.
// Verify it first to refuse a bad file before writing anything.
type File struct {
	Header Header
	f      *os.File
	r      *bufio.Reader
	sum    hash.Hash
	n      int64        // data lines read
	per    [kinds]int64 // of them, of each kind
	next   *line        // a line read ahead by a section: the next section's first
	last   int64        // the largest user number read, -1 before any
	err    error        // sticky
}

// Open opens the checkpoint at path and reads its header: of this
// Format, or FormatV1.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	c := &File{f: f, r: bufio.NewReaderSize(f, 1<<16), sum: sha256.New(), last: -1}
	head, err := readLine(c.r, headerWidth)
	if err == nil {
		err = decodeStrict(head, &c.Header)
	}
	h := c.Header
	switch {
	case err != nil:
		err = fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	case h.Format != Format && h.Format != FormatV1:
		err = fmt.Errorf("%w: header: format %q, want %q or %q", ErrCorrupt, h.Format, Format, FormatV1)
	case h.Count != h.Counters+h.States+h.Users+h.Sets:
		err = fmt.Errorf("%w: header: count %d is not counters %d + states %d + users %d + sets %d", ErrCorrupt, h.Count, h.Counters, h.States, h.Users, h.Sets)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the file.
func (c *File) Close() error { return c.f.Close() }

// Verify reads the whole checkpoint at path and checks every line, the
// count and the checksum, writing nothing.
func Verify(path string) (Header, error) {
	c, err := Open(path)
	if err != nil {
		return Header{}, err
	}
	defer c.Close()
	rows := c.Rows()
	for _, check := range []func() error{drain(rows.Counters), drain(rows.States), drain(rows.Users), drain(rows.Sets)} {
		if err := check(); err != nil {
			return c.Header, err
		}
	}
	return c.Header, nil
}

// drain returns a function that reads seq to its end or first error.
func drain[T any](seq iter.Seq2[T, error]) func() error {
	return func() error {
		for _, err := range seq {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// Rows returns the file's rows, to be read in their fields' order. A
// line that is out of that order, or does not decode, is an error
// wrapping ErrCorrupt naming the line.
func (c *File) Rows() store.CheckpointRows {
	return store.CheckpointRows{
		Counters: section(c, kindCounter, func(l *line) (store.CounterRow, error) {
			return store.CounterRow{Counter: l.Counter.Counter, Key: l.Counter.Key, Dimensions: l.Counter.Dimensions, Value: l.Counter.Value, UpdatedAt: l.Counter.UpdatedAt}, nil
		}),
		States: section(c, kindState, func(l *line) (store.EntityRow, error) {
			return store.EntityRow{Counter: l.State.Counter, Key: l.State.Key, Entity: l.State.Entity, EntityJSON: l.State.EntityRaw, UpdatedAt: l.State.UpdatedAt}, nil
		}),
		Users: section(c, kindUser, c.userRow),
		Sets:  section(c, kindActive, c.setRow),
	}
}

// userRow converts a user line; numbers must increase (the export's
// order), which makes them unique.
func (c *File) userRow(l *line) (store.UserNumberRow, error) {
	u, err := uum.ParseUUID("user_id", l.User.UserID)
	if err != nil {
		return store.UserNumberRow{}, fmt.Errorf("user: %w", err)
	}
	if int64(l.User.Number) <= c.last {
		return store.UserNumberRow{}, fmt.Errorf("user: number %d after %d: numbers must increase", l.User.Number, c.last)
	}
	c.last = int64(l.User.Number)
	return store.UserNumberRow{User: u, Number: l.User.Number}, nil
}

// setRow converts an active line: a day, and a set of numbers that the
// dictionary before it holds (at most its largest).
func (c *File) setRow(l *line) (store.ActiveSetRow, error) {
	day, err := time.Parse(time.DateOnly, l.Active.Day)
	if err != nil {
		return store.ActiveSetRow{}, fmt.Errorf("active: day %q is not a date as YYYY-MM-DD", l.Active.Day)
	}
	var set roaring.Bitmap
	if _, err := set.ReadFrom(bytes.NewReader(l.Active.Users)); err != nil {
		return store.ActiveSetRow{}, fmt.Errorf("active: users: %v", err)
	}
	if err := set.Validate(); err != nil {
		return store.ActiveSetRow{}, fmt.Errorf("active: users: %v", err)
	}
	if set.IsEmpty() || int64(set.Maximum()) > c.last {
		return store.ActiveSetRow{}, fmt.Errorf("active: users must be a non-empty set of the dictionary's numbers (at most %d)", c.last)
	}
	return store.ActiveSetRow{Event: l.Active.Event, Day: day, Users: l.Active.Users}, nil
}

// section iterates the lines of kind k, converted by conv. It stops at a
// line of a later kind, kept for that kind's section, and at the end of
// the file, whose count and checksum it checks; a line of an earlier kind
// is out of order.
func section[T any](c *File, k int, conv func(*line) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for {
			l := c.next
			c.next = nil
			var err error
			if l == nil {
				l, err = c.read()
			}
			switch {
			case err != nil:
			case l == nil:
				err = c.check()
			case l.kind() < k:
				err = c.fail(fmt.Sprintf("a %s line after the %s lines", kindNames[l.kind()], kindNames[k]))
			case l.kind() > k:
				c.next = l
				return
			}
			if err != nil {
				yield(zero, err)
				return
			}
			if l == nil {
				return
			}
			v, err := conv(l)
			if err != nil {
				yield(zero, c.fail(err.Error()))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
	}
}

// read returns the next data line, nil at the end of the file.
func (c *File) read() (*line, error) {
	if c.err != nil {
		return nil, c.err
	}
	b, err := readLine(c.r, MaxLineBytes)
	if errors.Is(err, errLineTooLong) {
		c.n++ // the line fail names
		return nil, c.fail(err.Error())
	}
	if errors.Is(err, io.EOF) && len(b) == 0 {
		return nil, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = fmt.Errorf("read checkpoint: %w", err)
		return nil, c.err
	}
	c.n++
	c.sum.Write(b)
	var l line
	if err := decodeStrict(b, &l); err != nil {
		return nil, c.fail(err.Error())
	}
	if reason := l.invalid(); reason != "" {
		return nil, c.fail(reason)
	}
	c.per[l.kind()]++
	return &l, nil
}

// errLineTooLong is a line past the limit readLine was given.
var errLineTooLong = errors.New("too long")

// readLine returns the next line of r, its newline included (none at the
// end of the file, with io.EOF), or errLineTooLong as soon as it exceeds
// limit bytes, having held at most limit of them.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > limit {
			return nil, fmt.Errorf("%w: over %d bytes", errLineTooLong, limit)
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// check compares the counts and the checksum with the header.
func (c *File) check() error {
	if c.n != c.Header.Count {
		c.err = fmt.Errorf("%w: %d data lines, the header says %d", ErrCorrupt, c.n, c.Header.Count)
		return c.err
	}
	if h := c.Header; c.per != [kinds]int64{h.Counters, h.States, h.Users, h.Sets} {
		c.err = fmt.Errorf("%w: %d counter, state, user and active lines, the header says %d", ErrCorrupt, c.per, [kinds]int64{h.Counters, h.States, h.Users, h.Sets})
		return c.err
	}
	if got := hex.EncodeToString(c.sum.Sum(nil)); got != c.Header.Checksum {
		c.err = fmt.Errorf("%w: checksum %s, the header says %s", ErrCorrupt, got, c.Header.Checksum)
		return c.err
	}
	return nil
}

func (c *File) fail(reason string) error {
	c.err = fmt.Errorf("%w: line %d: %s", ErrCorrupt, c.n+1, reason) // +1: the header
	return c.err
}

// Kinds of data lines, in the order of a file.
const (
	kindCounter = iota
	kindState
	kindUser
	kindActive
	kinds
)

var kindNames = [kinds]string{"counter", "state", "user", "active"}

// kind returns the kind of a valid line.
func (l *line) kind() int {
	switch {
	case l.Counter != nil:
		return kindCounter
	case l.State != nil:
		return kindState
	case l.User != nil:
		return kindUser
	}
	return kindActive
}

// invalid says what is wrong with a decoded line, "" if nothing.
func (l *line) invalid() string {
	object := func(raw json.RawMessage) bool {
		t := bytes.TrimSpace(raw)
		return len(t) > 0 && t[0] == '{'
	}
	set := 0
	for _, ok := range []bool{l.Counter != nil, l.State != nil, l.User != nil, l.Active != nil} {
		if ok {
			set++
		}
	}
	switch {
	case set != 1:
		return "want exactly one of counter, state, user, active"
	case l.Counter != nil && (l.Counter.Counter == "" || len(l.Counter.Key) != 16 || !object(l.Counter.Dimensions) || l.Counter.UpdatedAt.IsZero()):
		return "counter: want counter_name, a 16-byte dimension_key, a dimensions_json object and updated_at"
	case l.State != nil && (l.State.Counter == "" || len(l.State.Key) != 16 || len(l.State.Entity) != 16 || !object(l.State.EntityRaw) || l.State.UpdatedAt.IsZero()):
		return "state: want counter_name, 16-byte dimension_key and entity_key, an entity_json object and updated_at"
	}
	return ""
}

// decodeStrict decodes the one JSON value of b into v: unknown fields and
// anything but white space after the value are errors.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("unexpected %q after the JSON object", rest)
	}
	return nil
}
