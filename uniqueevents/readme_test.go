package uniqueevents_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEShowsExampleOpen keeps docs/library.md's snippet the code
// a user can copy: the body of ExampleOpen, which the compiler checks.
func TestREADMEShowsExampleOpen(t *testing.T) {
	t.Parallel()

	readme, err := os.ReadFile("../docs/library.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(readme), "# Library usage\n")
	require.True(t, found, "docs/library.md has a Library usage section")
	_, snippet, found := strings.Cut(section, "```go\n")
	require.True(t, found, "Library usage has a go block")
	snippet, _, _ = strings.Cut(snippet, "```\n")

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	_, body, found := strings.Cut(string(src), "func ExampleOpen() {\n")
	require.True(t, found)
	body, _, _ = strings.Cut(body, "\n}\n")
	var lines []string
	for line := range strings.Lines(body + "\n") {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	require.Equal(t, strings.Join(lines, ""), snippet)
}
