package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// root is the repository root, relative to this package.
const root = "../../.."

// readDoc returns a file of the repository as a string.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	require.NoError(t, err)
	return string(b)
}

// block is one fenced code block of a Markdown file.
type block struct {
	lang string // the info string after the opening fence
	text string // the lines between the fences, each ending in \n
	line int    // the line of the opening fence, from 1
}

// blocks returns the fenced code blocks of md in order.
func blocks(md string) []block {
	var out []block
	var cur *block
	n := 0
	for line := range strings.Lines(md) {
		n++
		trimmed := strings.TrimRight(line, "\n")
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			if cur == nil {
				cur = &block{lang: lang, line: n}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.text += line
		}
	}
	return out
}

// section returns the part of md from the line heading to the next heading
// of the same or a higher level (or the end), heading included.
func section(md, heading string) (string, bool) {
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		return "", false
	}
	level := strings.Index(heading, " ") // the number of #s
	var b strings.Builder
	b.WriteString(heading + "\n")
	fence := false
	for line := range strings.Lines(rest) {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if !fence {
			if h := strings.Index(line, " "); h > 0 && h <= level && strings.Trim(line[:h], "#") == "" {
				break
			}
		}
		b.WriteString(line)
	}
	return b.String(), true
}

// anchors returns the GitHub anchors of md's headings: lower case, without
// punctuation other than - and _, spaces as -, a repeated one with -1, -2...
func anchors(md string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	fence := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		text, ok := headingText(line)
		if fence || !ok {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// headingText returns the text of an ATX heading line.
func headingText(line string) (string, bool) {
	line = strings.TrimRight(line, "\n")
	hashes := len(line) - len(strings.TrimLeft(line, "#"))
	if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
		return "", false
	}
	return strings.TrimSpace(line[hashes:]), true
}

// docFiles are the Markdown files whose links must resolve.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinksResolve fails on a relative link to a file that does not exist,
// or to an anchor that no heading of its file makes: moving a section must
// move the links to it.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	for _, name := range docFiles(t) {
		md := readDoc(t, name)
		// Links inside code blocks are code, not links.
		prose := md
		for _, b := range blocks(md) {
			prose = strings.Replace(prose, b.text, "", 1)
		}
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := name
			if file != "" {
				path = filepath.Join(filepath.Dir(name), file)
				_, err := os.Stat(filepath.Join(root, path))
				require.NoError(t, err, "%s links to %s, which does not exist", name, target)
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			require.True(t, anchors(readDoc(t, path))[anchor],
				"%s links to %s: %s has no heading with the anchor #%s", name, target, path, anchor)
		}
	}
}

// TestREADMEIsAFirstHour keeps the README a task guide: reference material
// goes to docs/.
func TestREADMEIsAFirstHour(t *testing.T) {
	t.Parallel()
	lines := strings.Count(readDoc(t, "README.md"), "\n")
	require.LessOrEqual(t, lines, 400, "README.md has %d lines: move reference material to docs/", lines)
}
