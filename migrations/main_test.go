package migrations_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/uumhq/uum/internal/testkit/dbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, dbtest.LeakOptions()...)
}
