package checkpoint_test

import (
	"bytes"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/store"
)

func seq[T any](rows []T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }

type testBundle struct {
	dir      string
	path     string
	at       time.Time
	counters []store.CounterRow
	states   []store.EntityRow
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	dir := t.TempDir()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	return &testBundle{
		dir:  dir,
		path: filepath.Join(dir, "counters.jsonl"),
		at:   at,
		counters: []store.CounterRow{
			{Counter: "active_connections", Key: key(1), Dimensions: []byte(`{"masterAccountId":"m1"}`), Value: 3, UpdatedAt: at},
			{Counter: "connects_total", Key: key(2), Dimensions: []byte(`{"masterAccountId":"m\"2"}`), Value: -9223372036854775808, UpdatedAt: at.Add(-time.Hour)},
		},
		states: []store.EntityRow{
			{Counter: "connected_accounts", Key: key(3), Entity: key(4), EntityJSON: []byte(`{"accountId":"a1"}`), UpdatedAt: at},
		},
	}
}

func (b *testBundle) write(t *testing.T) checkpoint.Header {
	t.Helper()
	h, err := checkpoint.Write(b.path, b.at, seq(b.counters), seq(b.states))
	require.NoError(t, err)
	return h
}

func readAll(t *testing.T, path string) ([]store.CounterRow, []store.EntityRow) {
	t.Helper()
	f, err := checkpoint.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var cs []store.CounterRow
	for c, err := range f.Counters() {
		require.NoError(t, err)
		cs = append(cs, c)
	}
	var ss []store.EntityRow
	for s, err := range f.States() {
		require.NoError(t, err)
		ss = append(ss, s)
	}
	return cs, ss
}

// rewrite replaces old with new in the file at path.
func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600))
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.write(t)
	require.Equal(t, checkpoint.Header{Format: checkpoint.Format, Time: b.at, Count: 3, Counters: 2, States: 1, Checksum: h.Checksum}, h)
	require.Len(t, h.Checksum, 64)

	got, err := checkpoint.Verify(b.path)
	require.NoError(t, err)
	require.Equal(t, h.Checksum, got.Checksum)
	require.True(t, got.Time.Equal(b.at))

	cs, ss := readAll(t, b.path)
	require.Len(t, cs, 2)
	for i := range cs {
		require.True(t, cs[i].UpdatedAt.Equal(b.counters[i].UpdatedAt))
		cs[i].UpdatedAt = b.counters[i].UpdatedAt
	}
	require.Equal(t, b.counters, cs)
	require.Len(t, ss, 1)
	require.True(t, ss[0].UpdatedAt.Equal(b.at))
	ss[0].UpdatedAt = b.at
	require.Equal(t, b.states, ss)

	lines := strings.Split(strings.TrimSuffix(mustRead(t, b.path), "\n"), "\n")
	require.Len(t, lines, 4, "a header and one line per row")
	require.Contains(t, lines[1], `"dimension_key":"01010101010101010101010101010101"`)
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}

func TestEmptyCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.counters, b.states = nil, nil
	h := b.write(t)
	require.Equal(t, int64(0), h.Count)
	_, err := checkpoint.Verify(b.path)
	require.NoError(t, err)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		old, new string
		want     string
	}{
		{"ChangedValue", `"value":3`, `"value":4`, "checksum"},
		{"ChangedCount", `"count":3`, `"count":2`, "count 2 is not counters 2 + states 1"},
		{"DroppedLine", `{"state":`, `{"state":{}}` + "\n" + `{"nothing":`, "line 4"},
		{"NotJSON", `{"state":`, `nope`, "line 4"},
		{"UnknownField", `"value":3`, `"value":3,"extra":1`, "unknown field"},
		{"ShortKey", `"dimension_key":"01010101010101010101010101010101"`, `"dimension_key":"0101"`, "16-byte dimension_key"},
		{"BadFormat", `"format":"uum-counters/1"`, `"format":"uum-counters/9"`, "format"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.write(t)
			rewrite(t, b.path, tt.old, tt.new)
			_, err := checkpoint.Verify(b.path)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, tt.want)
		})
	}

	t.Run("Truncated", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.write(t)
		data := mustRead(t, b.path)
		require.NoError(t, os.WriteFile(b.path, []byte(data[:strings.LastIndex(strings.TrimSuffix(data, "\n"), "\n")+1]), 0o600))
		_, err := checkpoint.Verify(b.path)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, "2 data lines, the header says 3")
	})

	// Lines appended after a whole file. A line past the cap is
	// corruption, reported without reading it whole: an endless line
	// cannot exhaust memory.
	for _, tt := range []struct {
		name, appended, want string
	}{
		{"CounterAfterState", `{"counter":{"counter_name":"x","dimension_key":"02020202020202020202020202020202","dimensions_json":{},"value":1,"updated_at":"2026-03-01T12:00:00Z"}}` + "\n", "line 5: a counter after the states"},
		{"LineOverTheCap", strings.Repeat("x", checkpoint.MaxLineBytes+1), "line 5: too long: over 1048576 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.write(t)
			f, err := os.OpenFile(b.path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(tt.appended)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, err = checkpoint.Verify(b.path)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, tt.want)
		})
	}

	t.Run("HeaderOverTheCap", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "c.jsonl")
		require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte(" "), 4096), 0o600))
		_, err := checkpoint.Verify(path)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, "header: too long: over 256 bytes")
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		_, err := checkpoint.Verify(filepath.Join(t.TempDir(), "nope.jsonl"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// TestWriteRefusesALineOverTheCap: what Write writes, a reader reads.
func TestWriteRefusesALineOverTheCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.counters[1].Dimensions = []byte(`{"a":"` + strings.Repeat("x", checkpoint.MaxLineBytes) + `"}`)
	_, err := checkpoint.Write(b.path, b.at, seq(b.counters), seq(b.states))
	require.ErrorContains(t, err, "row 2 is a line of")
	require.NoFileExists(t, b.path)
}

func TestFailedWriteLeavesNoFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("connection reset")
	failing := func(yield func(store.EntityRow, error) bool) {
		if yield(b.states[0], nil) {
			yield(store.EntityRow{}, boom)
		}
	}
	_, err := checkpoint.Write(b.path, b.at, seq(b.counters), failing)
	require.ErrorIs(t, err, boom)
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	// An existing checkpoint is replaced only by a complete one.
	b.write(t)
	before := mustRead(t, b.path)
	_, err = checkpoint.Write(b.path, b.at, seq(b.counters), failing)
	require.Error(t, err)
	require.Equal(t, before, mustRead(t, b.path))
	entries, err = os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Equal(t, []string{"counters.jsonl"}, slices.Collect(func(yield func(string) bool) {
		for _, e := range entries {
			if !yield(e.Name()) {
				return
			}
		}
	}))
}
