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
// processor, asynq). A trivial producer binary was 18.1 MB with goose
// linked, 17.5 MB without (12.6 and 12.2 MB with -ldflags=-s -w).
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
