package store_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/store"
)

func rowsOf[T any](rows ...T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Microsecond)
	counter := store.CounterRow{Counter: "c", Key: bytes.Repeat([]byte{1}, 16), Dimensions: []byte(`{"m":"1"}`), Value: 5, UpdatedAt: at}
	state := store.EntityRow{Counter: "c", Key: counter.Key, Entity: bytes.Repeat([]byte{2}, 16), EntityJSON: []byte(`{"a":"1"}`), UpdatedAt: at}

	t.Run("RestoreThenExport", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := b.store.RestoreCounters(ctx, store.CheckpointRows{Counters: rowsOf(counter), States: rowsOf(state)})
		require.NoError(t, err)
		require.Equal(t, store.Restored{Counters: 1, States: 1}, n)
		err = b.store.ExportCounters(ctx, func(snap time.Time, rows store.CheckpointRows) error {
			counters, states := rows.Counters, rows.States
			require.WithinDuration(t, time.Now(), snap, time.Minute)
			var cs []store.CounterRow
			for c, err := range counters {
				require.NoError(t, err)
				cs = append(cs, c)
			}
			var ss []store.EntityRow
			for s, err := range states {
				require.NoError(t, err)
				ss = append(ss, s)
			}
			require.Len(t, cs, 1)
			require.True(t, cs[0].UpdatedAt.Equal(at))
			require.JSONEq(t, string(counter.Dimensions), string(cs[0].Dimensions), "jsonb spaces its text")
			cs[0].UpdatedAt, cs[0].Dimensions = at, counter.Dimensions
			require.Equal(t, counter, cs[0])
			require.Len(t, ss, 1)
			require.JSONEq(t, string(state.EntityJSON), string(ss[0].EntityJSON))
			ss[0].UpdatedAt, ss[0].EntityJSON = at, state.EntityJSON
			require.Equal(t, state, ss[0])
			return nil
		})
		require.NoError(t, err)

		_, err = b.store.RestoreCounters(ctx, store.CheckpointRows{Counters: rowsOf(counter), States: rowsOf[store.EntityRow]()})
		require.ErrorIs(t, err, store.ErrCountersExist)
	})

	t.Run("RefusesWhenOnlyStatesExist", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.RestoreCounters(ctx, store.CheckpointRows{Counters: rowsOf[store.CounterRow](), States: rowsOf(state)})
		require.NoError(t, err)
		_, err = b.store.RestoreCounters(ctx, store.CheckpointRows{Counters: rowsOf(counter), States: rowsOf[store.EntityRow]()})
		require.ErrorIs(t, err, store.ErrCountersExist)
	})

	t.Run("AFailingSourceWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		boom := errors.New("checksum changed")
		failing := func(yield func(store.EntityRow, error) bool) {
			if yield(state, nil) {
				yield(store.EntityRow{}, boom)
			}
		}
		_, err := b.store.RestoreCounters(ctx, store.CheckpointRows{Counters: rowsOf(counter), States: failing})
		require.ErrorIs(t, err, boom)
		var n int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM counters) + (SELECT count(*) FROM counter_states)`).Scan(&n))
		require.Zero(t, n)
	})
}
