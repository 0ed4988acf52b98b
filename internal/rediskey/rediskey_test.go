package rediskey_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/rediskey"
)

func TestKeys(t *testing.T) {
	t.Parallel()

	t.Run("BufferAndLeaseShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:{buffer:3}:pending", rediskey.Buffer("p:", 3))
		require.Equal(t, "p:{buffer:3}:lease", rediskey.Lease("p:", 3))
		require.Equal(t, "p:{buffer:3}:cursor", rediskey.Cursor("p:", 3))
	})

	t.Run("SeenKeyNamesGenerationAndBucket", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:s:{0a1b2c3d.0:345}:12", rediskey.Seen("p:", "0a1b2c3d.0", 12, 345))
	})

	t.Run("SeenGenerationsOfABucketShareHashTag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "p:s:{x:7}:12", rediskey.Seen("p:", "x", 12, 7))
		require.Equal(t, "p:s:{x:7}:11", rediskey.Seen("p:", "x", 11, 7))
	})
}
