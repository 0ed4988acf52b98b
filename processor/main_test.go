package processor_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/uumhq/uum/internal/testkit/dbtest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(holderEnv); spec != "" {
		os.Exit(runHolder(spec))
	}
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}
