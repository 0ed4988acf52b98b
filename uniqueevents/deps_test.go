package uniqueevents_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProducerLinksNoMigrationsOrDrain keeps what an application links
// for logging events small: the producer library reads and writes rows,
// it never migrates (goose and the SQL files) and never drains (the
// processor, asynq).
func TestProducerLinksNoMigrationsOrDrain(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "github.com/uumhq/uum/uniqueevents").Output()
	require.NoError(t, err, "go list -deps")
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/uumhq/uum/store", "the listing is of the producer's real imports")
	for _, banned := range []string{
		"github.com/pressly/goose/v3",
		"github.com/uumhq/uum/migrations",
		"github.com/uumhq/uum/processor",
		"github.com/hibiken/asynq",
	} {
		require.NotContains(t, deps, banned, "uniqueevents links %s", banned)
	}
}

// maxProducerBytes bounds the trivial producer's binary, unstripped, in
// MB as the docs count them (10^6 bytes). The goal was 12 MB; above the
// Go runtime, TLS and go-redis (with the cluster client UUM_REDIS_CLUSTER
// needs) the producer links the DataDog client (whose package init
// compiles regexps) and the package inits of pgx, which the store's
// import brings in (pgconn's SASLprep links golang.org/x/text's tables).
const maxProducerBytes = 13_000_000

// TestProducerBinary builds the trivial producer (testdata/producer:
// Open and one LogEvents) and keeps it at most 13.0 MB unstripped,
// without goose, asynq or a Postgres driver's connection code: Open
// leaves the Postgres side to the first read. It was 14.0 MB when Open
// built the Postgres side at once; 12.3 MB with it left to the first read,
// the cluster client and the push's WAIT (Go 1.26.8, linux/amd64; go test
// -v -run TestProducerBinary prints it); 12.7 MB with the active-user
// reads (roaring bitmaps and the activeusers package, ~0.4 MB), which the
// one library that reads carries; 12.9 MB with the ingestion pause switch
// (package pause), the entry-size refusal and store.Open (~0.2 MB).
func TestProducerBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "producer")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/producer")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	t.Logf("trivial producer: %d bytes (%.1f MB)", fi.Size(), float64(fi.Size())/1e6)
	require.LessOrEqual(t, fi.Size(), int64(maxProducerBytes), "the trivial producer grew past 13.0 MB")

	out, err = exec.CommandContext(t.Context(), "go", "version", "-m", bin).Output()
	require.NoError(t, err, "go version -m")
	require.Contains(t, string(out), "github.com/redis/go-redis/v9", "the listing is of the binary's modules")
	for _, banned := range []string{"github.com/pressly/goose", "github.com/hibiken/asynq"} {
		require.NotContains(t, string(out), banned, "the producer binary links %s", banned)
	}

	out, err = exec.CommandContext(t.Context(), "go", "tool", "nm", bin).Output()
	require.NoError(t, err, "go tool nm")
	syms := string(out)
	require.Contains(t, syms, "github.com/uumhq/uum/uniqueevents.(*Client).LogEvents", "the symbols are the producer's")
	for _, banned := range []string{
		"github.com/jackc/pgx/v5/pgxpool.NewWithConfig", // Postgres waits for the first read
		"github.com/uumhq/uum/processor.",
		"github.com/uumhq/uum/migrations.",
	} {
		require.NotContains(t, syms, banned, "the producer binary links %s", banned)
	}
}
