package docstest

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum/internal/testkit/testenv"
)

// step is one shell block of the walkthrough and the output block after it.
type step struct {
	cmd, want string
	line      int
}

// walkthrough returns the README walkthrough's shell blocks with the output
// each one shows, and its Go program.
func walkthrough(t *testing.T) (steps []step, program string) {
	t.Helper()
	readme := readDoc(t, "README.md")
	wt, ok := section(readme, "## Walkthrough")
	require.True(t, ok, "README.md has a Walkthrough section")
	bs := blocks(wt)
	start := strings.Count(readme[:strings.Index(readme, wt)], "\n")
	for i := range bs {
		bs[i].line += start
	}
	for i := 0; i < len(bs); i++ {
		switch bs[i].lang {
		case "go":
			require.Empty(t, program, "the walkthrough has one Go program")
			program = bs[i].text
		case "sh":
			require.True(t, i+1 < len(bs) && bs[i+1].lang == "",
				"README.md:%d: a sh block of the walkthrough without an output block after it", bs[i].line)
			steps = append(steps, step{cmd: bs[i].text, want: bs[i+1].text, line: bs[i].line})
			i++
		default:
			t.Fatalf("README.md:%d: a %q block in the walkthrough is neither sh, its output, nor the Go program", bs[i].line, bs[i].lang)
		}
	}
	require.NotEmpty(t, steps)
	return steps, program
}

// missingMark starts the line the walkthrough's shell writes to stderr
// for a command it cannot find.
const missingMark = "uum-walkthrough: program not found: "

// missingProgram returns the first program the walkthrough's shell could
// not find, from its stderr.
func missingProgram(stderr string) (string, bool) {
	for line := range strings.Lines(stderr) {
		if prog, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), missingMark); ok {
			return prog, true
		}
	}
	return "", false
}

// outputRE turns a shown output into a regexp of what it stands for: the
// text as is, with each … standing for any text within one line.
func outputRE(want string) *regexp.Regexp {
	parts := strings.Split(strings.TrimRight(want, "\n"), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`\A` + strings.Join(parts, `[^\n]*`) + `\z`)
}

// binRE finds the walkthrough's .bin/ paths, which the test points at the
// binaries it built, never at the checkout's own .bin/.
var binRE = regexp.MustCompile(`(^|[\s;&|(])\.bin/`)

// TestQuickStart runs the README's walkthrough as written, against an API
// and binaries built from this checkout, on a Postgres schema and a Redis
// key prefix of its own, and fails when a block prints anything other
// than the output the README shows after it. Three things are
// substituted: the API's address (a free port instead of 127.0.0.1:8080),
// .bin/ (the binaries the test built) and `go run ./examples/quickstart`
// (the same program, built with the others in one go build, which is
// faster than a go run of its own).
func TestQuickStart(t *testing.T) {
	t.Parallel()
	steps, program := walkthrough(t)

	src := readDoc(t, "examples/quickstart/main.go")
	require.True(t, strings.HasSuffix(src, program),
		"the README's Go program is examples/quickstart/main.go from its package clause on; README:\n%s", program)

	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	bin := t.TempDir()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool builds the binaries")
	args := []string{"build", "-o", bin + "/"}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/api", "./cmd/processor", "./cmd/uumctl", "./examples/quickstart")
	build := exec.CommandContext(t.Context(), goTool, args...)
	build.Dir = repo
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)

	stack := testenv.New(t)
	env := stack.Env
	// What make run sets when they are unset (scripts/run.sh).
	env["UUM_API_TOKENS"] = "admin:dev-admin-token-change-me"
	env["UUM_COUNTERS_FILE"] = "counters.example.yaml"
	testenv.StartAPI(t, filepath.Join(bin, "api"), repo, env)
	addr := env["UUM_API_ADDR"]

	// One shell for the whole walkthrough, as a reader types it into one
	// terminal: variables set in one block are there in the next. A marker
	// line after each block splits the output.
	const marker = "\x1e-- end of block --\x1e"
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	// A program the walkthrough runs but the machine lacks (curl on a bare
	// one) is named, not only found in bash's stderr behind a mismatch.
	script.WriteString(`command_not_found_handle() { printf '` + missingMark + `%s\n' "$1" >&2; return 127; }` + "\n")
	for _, s := range steps {
		cmd := strings.ReplaceAll(s.cmd, "127.0.0.1:8080", addr)
		cmd = binRE.ReplaceAllString(cmd, "${1}"+bin+"/")
		cmd = strings.ReplaceAll(cmd, "go run ./examples/quickstart", bin+"/quickstart")
		script.WriteString(cmd + "printf '%s\\n' '" + marker + "'\n")
	}
	sh := exec.CommandContext(t.Context(), "bash", "-c", script.String())
	sh.Dir = repo
	delete(env, "UUM_COUNTERS_FILE") // the walkthrough exports it itself
	sh.Env = env.Environ()
	var stderr strings.Builder
	sh.Stderr = &stderr
	got, err := sh.Output()
	if prog, ok := missingProgram(stderr.String()); ok {
		t.Fatalf("the README's walkthrough runs %[1]s, which is not installed: install %[1]s "+
			"(scripts/services.sh test, which make test and .ci/run run, installs the programs the tests run)", prog)
	}
	outs := strings.Split(string(got), marker+"\n")
	for i, s := range steps {
		require.Greater(t, len(outs), i, "the walkthrough stopped before the block at README.md:%d: %v; stderr:\n%s", s.line, err, stderr.String())
		require.Regexp(t, outputRE(s.want), strings.TrimRight(outs[i], "\n"),
			"the block at README.md:%d printed something other than the README shows.\nblock:\n%s\nREADME shows:\n%s\nstderr:\n%s",
			s.line, s.cmd, s.want, stderr.String())
	}
	require.NoError(t, err, "stderr:\n%s", stderr.String())
}
