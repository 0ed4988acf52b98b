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

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/checkpoint"
	"github.com/uumhq/uum/internal/testkit/uuidtest"
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
	users    []store.UserNumberRow
	sets     []store.ActiveSetRow
}

// bitmap serializes a set of user numbers.
func bitmap(t *testing.T, numbers ...uint32) []byte {
	t.Helper()
	b, err := roaring.BitmapOf(numbers...).ToBytes()
	require.NoError(t, err)
	return b
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
		users: []store.UserNumberRow{
			{User: uuidtest.MustParse("0b3e3f7e-7d41-4a55-8a0e-4f3b8b7a1c01"), Number: 0},
			{User: uuidtest.MustParse("0b3e3f7e-7d41-4a55-8a0e-4f3b8b7a1c02"), Number: 7},
		},
		sets: []store.ActiveSetRow{
			{Event: "", Day: time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), Users: bitmap(t, 0, 7)},
		},
	}
}

func (b *testBundle) rows() store.CheckpointRows {
	return store.CheckpointRows{Counters: seq(b.counters), States: seq(b.states), Users: seq(b.users), Sets: seq(b.sets)}
}

func (b *testBundle) write(t *testing.T) checkpoint.Header {
	t.Helper()
	h, err := checkpoint.Write(b.path, b.at, b.rows())
	require.NoError(t, err)
	return h
}

func collect[T any](t *testing.T, rows iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for r, err := range rows {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

func readAll(t *testing.T, path string) ([]store.CounterRow, []store.EntityRow, []store.UserNumberRow, []store.ActiveSetRow) {
	t.Helper()
	f, err := checkpoint.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows := f.Rows()
	cs, ss := collect(t, rows.Counters), collect(t, rows.States)
	return cs, ss, collect(t, rows.Users), collect(t, rows.Sets)
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
	require.Equal(t, checkpoint.Header{Format: checkpoint.Format, Time: b.at, Count: 6, Counters: 2, States: 1, Users: 2, Sets: 1, Checksum: h.Checksum}, h)
	require.Len(t, h.Checksum, 64)

	got, err := checkpoint.Verify(b.path)
	require.NoError(t, err)
	require.Equal(t, h.Checksum, got.Checksum)
	require.True(t, got.Time.Equal(b.at))

	cs, ss, us, sets := readAll(t, b.path)
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
	require.Equal(t, b.users, us)
	require.Equal(t, b.sets, sets)

	lines := strings.Split(strings.TrimSuffix(mustRead(t, b.path), "\n"), "\n")
	require.Len(t, lines, 7, "a header and one line per row")
	require.Equal(t, `{"user":{"user_id":"0b3e3f7e-7d41-4a55-8a0e-4f3b8b7a1c02","number":7}}`, lines[5])
	require.Contains(t, lines[6], `{"active":{"event_name":"","day":"2026-02-28","users":"`)
	require.Contains(t, lines[1], `"dimension_key":"01010101010101010101010101010101"`)
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}

func TestEmptyCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.counters, b.states, b.users, b.sets = nil, nil, nil, nil
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
		{"ChangedCount", `"count":6`, `"count":5`, "count 5 is not counters 2 + states 1 + users 2 + sets 1"},
		{"ChangedUsers", `"users":2,"sets":1`, `"users":1,"sets":2`, "header says [2 1 1 2]"},
		{"NumbersNotIncreasing", `"number":7`, `"number":0`, "line 6: user: number 0 after 0"},
		{"BadUserID", `"user_id":"0b3e3f7e-7d41-4a55-8a0e-4f3b8b7a1c02"`, `"user_id":"u2"`, "line 6: user: uum: invalid user_id"},
		{"BadDay", `"day":"2026-02-28"`, `"day":"2026-02-30"`, "line 7: active: day"},
		{"DroppedLine", `{"state":`, `{"state":{}}` + "\n" + `{"nothing":`, "line 4"},
		{"NotJSON", `{"state":`, `nope`, "line 4"},
		{"UnknownField", `"value":3`, `"value":3,"extra":1`, "unknown field"},
		{"ShortKey", `"dimension_key":"01010101010101010101010101010101"`, `"dimension_key":"0101"`, "16-byte dimension_key"},
		{"BadFormat", `"format":"uum-counters/2"`, `"format":"uum-counters/9"`, "format"},
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
		require.ErrorContains(t, err, "5 data lines, the header says 6")
	})

	// Lines appended after a whole file. A line past the cap is
	// corruption, reported without reading it whole: an endless line
	// cannot exhaust memory.
	for _, tt := range []struct {
		name, appended, want string
	}{
		{"CounterAfterActive", `{"counter":{"counter_name":"x","dimension_key":"02020202020202020202020202020202","dimensions_json":{},"value":1,"updated_at":"2026-03-01T12:00:00Z"}}` + "\n", "line 8: a counter line after the active lines"},
		{"UserAfterActive", `{"user":{"user_id":"0b3e3f7e-7d41-4a55-8a0e-4f3b8b7a1c09","number":9}}` + "\n", "line 8: a user line after the active lines"},
		{"SetOfANumberNotInTheDictionary", `{"active":{"event_name":"login","day":"2026-02-28","users":"OjAAAAEAAAAAAAAAEAAAAAgA"}}` + "\n", "line 8: active: users must be a non-empty set of the dictionary's numbers (at most 7)"},
		{"LineOverTheCap", strings.Repeat("x", checkpoint.MaxLineBytes+1), "line 8: too long: over 1048576 bytes"},
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
		require.ErrorContains(t, err, "header: too long: over 512 bytes")
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
	_, err := checkpoint.Write(b.path, b.at, b.rows())
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
	_, err := checkpoint.Write(b.path, b.at, store.CheckpointRows{Counters: seq(b.counters), States: failing})
	require.ErrorIs(t, err, boom)
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	// An existing checkpoint is replaced only by a complete one.
	b.write(t)
	before := mustRead(t, b.path)
	_, err = checkpoint.Write(b.path, b.at, store.CheckpointRows{Counters: seq(b.counters), States: failing})
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

// TestReadsVersion1: a file of uum-counters/1, written before the active
// users, reads as before, with no users and no sets.
func TestReadsVersion1(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.users, b.sets = nil, nil
	b.write(t)
	rewrite(t, b.path, `"format":"uum-counters/2"`, `"format":"uum-counters/1"`)
	h, err := checkpoint.Verify(b.path)
	require.NoError(t, err)
	require.Equal(t, [3]int64{3, 0, 0}, [3]int64{h.Count, h.Users, h.Sets})
	cs, ss, us, sets := readAll(t, b.path)
	require.Len(t, cs, 2)
	require.Len(t, ss, 1)
	require.Empty(t, us)
	require.Empty(t, sets)
}
