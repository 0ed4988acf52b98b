package uuidtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/uuidtest"
)

func TestMustParse(t *testing.T) {
	t.Parallel()

	const id = "5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f"

	t.Run("ReturnsParsed", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, id, uuidtest.MustParse("5F0C6A8E-3B1D-4C2A-9E7F-1A2B3C4D5E6F").String())
	})

	t.Run("PanicsOnInvalid", func(t *testing.T) {
		t.Parallel()
		require.Panics(t, func() { uuidtest.MustParse("nope") })
	})
}
