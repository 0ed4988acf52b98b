package uum_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
)

func TestAbbreviate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		in        string
		wantShort string
		wantCut   string
	}{
		{name: "ShortIsWhole", in: "abc", wantShort: "abc"},
		{name: "ExactlyMaxIsWhole", in: strings.Repeat("a", 100), wantShort: strings.Repeat("a", 100)},
		{name: "LongIsCut", in: strings.Repeat("a", 101), wantShort: strings.Repeat("a", 100), wantCut: "... (101 bytes in all)"},
		{name: "CutsOnRuneBoundary", in: strings.Repeat("a", 99) + "éé", wantShort: strings.Repeat("a", 99), wantCut: "... (103 bytes in all)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			short, cut := uum.Abbreviate(tt.in)
			require.Equal(t, tt.wantShort, short)
			require.Equal(t, tt.wantCut, cut)
		})
	}
}
