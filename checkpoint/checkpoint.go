// Package checkpoint reads and writes the persistent counters' checkpoint
// file (seed 001 "periodic export/checkpoint"): JSON Lines, a header line
// {format, time, count, counters, states, users, sets, checksum} and then
// one line per counter row, per entity state of the transition-safe
// counters, per user of the active-user dictionary and per row of the
// active-user sets, in that order. The checksum is SHA-256 (hex) over the
// bytes of the data lines. Files are written and read as streams: no file
// is held in memory. Files of format uum-counters/1 (no users, no sets)
// are read as before.
package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"time"

	"github.com/uumhq/uum/store"
)

// Format names this file format and its version in the header. Version 2
// added the user and active lines and the header's users and sets.
const Format = "uum-counters/2"

// FormatV1 is the format of files without active users, which Open reads.
const FormatV1 = "uum-counters/1"

// headerWidth is the header line's size with its newline: the header is
// written last, over a blank line of this size reserved first, so a file
// is written in one pass. JSON allows the trailing spaces that pad it.
// uum-counters/1 wrote 256 bytes; a reader takes either.
const headerWidth = 512

// MaxLineBytes is the longest data line, its newline included, that Write
// writes and a reader accepts; a longer one is corruption, found without
// reading it whole into memory. A row's longest legitimate line, 32
// dimensions of the longest keys and values with every character escaped,
// is about 64 KiB.
const MaxLineBytes = 1 << 20

// ErrCorrupt is returned for a file that is not a whole checkpoint: a bad
// header or line, or a count or checksum that does not match.
var ErrCorrupt = errors.New("uum: checkpoint file is corrupt")

// Header is a checkpoint's first line.
type Header struct {
	Format   string    `json:"format"`
	Time     time.Time `json:"time"`  // of the snapshot the rows were read from
	Count    int64     `json:"count"` // data lines: Counters + States + Users + Sets
	Counters int64     `json:"counters"`
	States   int64     `json:"states"`
	// Users are the lines of the user dictionary, Sets those of the
	// active-user sets (rows of them); both 0 in a uum-counters/1 file.
	Users    int64  `json:"users,omitempty"`
	Sets     int64  `json:"sets,omitempty"`
	Checksum string `json:"checksum"` // SHA-256 of the data lines, hex
}

// line is one data line: exactly one of its fields is set.
type line struct {
	Counter *counterLine `json:"counter,omitempty"`
	State   *stateLine   `json:"state,omitempty"`
	User    *userLine    `json:"user,omitempty"`
	Active  *activeLine  `json:"active,omitempty"`
}

// userLine is a user of the dictionary and its number.
type userLine struct {
	UserID string `json:"user_id"`
	Number uint32 `json:"number"`
}

// activeLine is a row of an active-user set: users is a roaring bitmap
// of user numbers in its portable format, base64; event_name "" is any
// event.
type activeLine struct {
	Event string `json:"event_name"`
	Day   string `json:"day"`
	Users []byte `json:"users"`
}

type counterLine struct {
	Counter    string          `json:"counter_name"`
	Key        hexBytes        `json:"dimension_key"`
	Dimensions json.RawMessage `json:"dimensions_json"`
	Value      int64           `json:"value"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

type stateLine struct {
	Counter   string          `json:"counter_name"`
	Key       hexBytes        `json:"dimension_key"`
	Entity    hexBytes        `json:"entity_key"`
	EntityRaw json.RawMessage `json:"entity_json"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// hexBytes is a key digest, written in hex like the logs' dimensionKey.
type hexBytes []byte

func (h hexBytes) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h), nil }

func (h *hexBytes) UnmarshalText(b []byte) error {
	out, err := hex.AppendDecode(nil, b)
	*h = out
	return err
}

// Write writes a checkpoint of rows to path: into a temporary file in
// the same directory, renamed to path once complete and synced, so a
// failed export leaves no partial file.
func Write(path string, at time.Time, rows store.CheckpointRows) (Header, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return Header{}, fmt.Errorf("write checkpoint: %w", err)
	}
	h, err := writeFile(f, at, rows)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write checkpoint: %w", cerr)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return Header{}, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Header{}, err
	}
	return h, nil
}

// syncDir makes a rename in dir durable: until the directory is synced,
// a crash can leave the old name, or none, although the file's data was.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write checkpoint: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write checkpoint: sync directory: %w", err)
	}
	return nil
}

func writeFile(f *os.File, at time.Time, rows store.CheckpointRows) (Header, error) {
	h := Header{Format: Format, Time: at.UTC()}
	buf := bufio.NewWriterSize(f, 1<<16)
	sum := sha256.New()
	out := io.MultiWriter(buf, sum)
	if _, err := buf.Write(append(bytes.Repeat([]byte(" "), headerWidth-1), '\n')); err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	var err error
	h.Counters, err = writeAll(rows.Counters, func(c store.CounterRow) line {
		return line{Counter: &counterLine{c.Counter, c.Key, c.Dimensions, c.Value, c.UpdatedAt.UTC()}}
	}, out)
	if err == nil {
		h.States, err = writeAll(rows.States, func(e store.EntityRow) line {
			return line{State: &stateLine{e.Counter, e.Key, e.Entity, e.EntityJSON, e.UpdatedAt.UTC()}}
		}, out)
	}
	if err == nil {
		h.Users, err = writeAll(rows.Users, func(u store.UserNumberRow) line {
			return line{User: &userLine{u.User.String(), u.Number}}
		}, out)
	}
	if err == nil {
		h.Sets, err = writeAll(rows.Sets, func(a store.ActiveSetRow) line {
			return line{Active: &activeLine{a.Event, a.Day.UTC().Format(time.DateOnly), a.Users}}
		}, out)
	}
	if err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	h.Count = h.Counters + h.States + h.Users + h.Sets
	h.Checksum = hex.EncodeToString(sum.Sum(nil))
	if err := buf.Flush(); err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	head, err := json.Marshal(h)
	if err != nil || len(head) >= headerWidth {
		return h, fmt.Errorf("write checkpoint: header of %d bytes: %v", len(head), err)
	}
	if _, err := f.WriteAt(head, 0); err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	return h, nil
}

// writeAll writes one line per row of seq (none if nil) to w and returns
// how many.
func writeAll[T any](seq iter.Seq2[T, error], toLine func(T) line, w io.Writer) (int64, error) {
	var n int64
	if seq == nil {
		return 0, nil
	}
	for row, err := range seq {
		if err != nil {
			return n, err
		}
		b, err := json.Marshal(toLine(row))
		if err != nil {
			return n, err
		}
		if len(b)+1 > MaxLineBytes {
			return n, fmt.Errorf("row %d is a line of %d bytes, over the %d-byte limit", n+1, len(b)+1, MaxLineBytes)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
