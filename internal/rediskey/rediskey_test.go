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
		require.Equal(t, "p:s:0a1b2c3d:12:345", rediskey.Seen("p:", "0a1b2c3d", 12, 345))
	})
}
