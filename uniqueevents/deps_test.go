package uniqueevents_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProducerLinksNoMigrationsOrDrain keeps what an application links
// for logging events small: the producer library reads and writes rows,
// it never migrates (goose and the SQL files) and never drains (the
// processor, asynq). A producer that opens the client and logs one event
// was 14.6 MB with goose linked, 14.0 MB without (10.3 and 9.8 MB with
// -ldflags=-s -w).
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
