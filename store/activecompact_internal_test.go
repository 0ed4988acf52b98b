package store

import (
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"
)

func TestSplitSet(t *testing.T) {
	t.Parallel()
	sparse := roaring.BitmapOf(5, 70_000, 9_000_000)
	dense := roaring.New()
	for i := uint32(0); i < 10_000_000; i += 7 {
		dense.Add(i)
	}
	for _, tt := range []struct {
		name string
		set  *roaring.Bitmap
		rows int
	}{
		{"EmptyIsNoRow", roaring.New(), 0},
		{"SparseIsOneRow", sparse, 1},
		{"DenseIsCutAtTheTarget", dense, 51}, // 153 8 KiB containers, 3 a row
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			chunks, rows, counts, err := splitSet(tt.set.Clone(), activeRowTarget)
			require.NoError(t, err)
			require.Equal(t, tt.rows, len(rows))
			union := roaring.New()
			for i, b := range rows {
				require.LessOrEqual(t, len(b), activeRowTarget+64)
				var r roaring.Bitmap
				require.NoError(t, r.UnmarshalBinary(b))
				require.Equal(t, chunks[i], int32(r.Minimum()>>16), "keyed by its first number's high bits")
				require.Equal(t, int64(r.GetCardinality()), counts[i], "its users counted")
				require.Zero(t, roaring.And(union, &r).GetCardinality(), "rows are disjoint")
				union.Or(&r)
			}
			require.True(t, union.Equals(tt.set))
		})
	}
}
