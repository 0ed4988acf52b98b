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

	"github.com/uumhq/uum/store"
)

// File is a checkpoint open for reading. Its rows are read in one pass,
// counters then states; the count and checksum are checked when the
// states end, so a consumer that commits only after both iterators ended
// without error commits a whole, intact file. Verify it first to refuse
// a bad file before writing anything.
type File struct {
	Header Header
	f      *os.File
	r      *bufio.Reader
	sum    hash.Hash
	n      int64 // data lines read
	next   *line // a line read ahead by Counters: the first state
	err    error // sticky
}

// Open opens the checkpoint at path and reads its header.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	c := &File{f: f, r: bufio.NewReaderSize(f, 1<<16), sum: sha256.New()}
	head, err := readLine(c.r, headerWidth)
	if err == nil {
		err = decodeStrict(head, &c.Header)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	case c.Header.Format != Format:
		err = fmt.Errorf("%w: header: format %q, want %q", ErrCorrupt, c.Header.Format, Format)
	case c.Header.Count != c.Header.Counters+c.Header.States:
		err = fmt.Errorf("%w: header: count %d is not counters %d + states %d", ErrCorrupt, c.Header.Count, c.Header.Counters, c.Header.States)
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
	for _, err := range c.Counters() {
		if err != nil {
			return c.Header, err
		}
	}
	for _, err := range c.States() {
		if err != nil {
			return c.Header, err
		}
	}
	return c.Header, nil
}

// Counters iterates the counter rows.
func (c *File) Counters() iter.Seq2[store.CounterRow, error] {
	return func(yield func(store.CounterRow, error) bool) {
		for {
			l, err := c.read()
			if err != nil {
				yield(store.CounterRow{}, err)
				return
			}
			if l == nil {
				return
			}
			if l.Counter == nil {
				c.next = l
				return
			}
			r := store.CounterRow{Counter: l.Counter.Counter, Key: l.Counter.Key, Dimensions: l.Counter.Dimensions, Value: l.Counter.Value, UpdatedAt: l.Counter.UpdatedAt}
			if !yield(r, nil) {
				return
			}
		}
	}
}

// States iterates the entity states, after Counters; at the end of the
// file it checks the count and the checksum.
func (c *File) States() iter.Seq2[store.EntityRow, error] {
	return func(yield func(store.EntityRow, error) bool) {
		for {
			l := c.next
			c.next = nil
			var err error
			if l == nil {
				l, err = c.read()
			}
			if err == nil && l == nil {
				err = c.check()
			}
			if err == nil && l != nil && l.State == nil {
				err = c.fail("a counter after the states")
			}
			if err != nil {
				yield(store.EntityRow{}, err)
				return
			}
			if l == nil {
				return
			}
			r := store.EntityRow{Counter: l.State.Counter, Key: l.State.Key, Entity: l.State.Entity, EntityJSON: l.State.EntityRaw, UpdatedAt: l.State.UpdatedAt}
			if !yield(r, nil) {
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

// check compares the count and the checksum with the header.
func (c *File) check() error {
	if c.n != c.Header.Count {
		c.err = fmt.Errorf("%w: %d data lines, the header says %d", ErrCorrupt, c.n, c.Header.Count)
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

// invalid says what is wrong with a decoded line, "" if nothing.
func (l *line) invalid() string {
	object := func(raw json.RawMessage) bool {
		t := bytes.TrimSpace(raw)
		return len(t) > 0 && t[0] == '{'
	}
	switch {
	case (l.Counter == nil) == (l.State == nil):
		return "want exactly one of counter, state"
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
