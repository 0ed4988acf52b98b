package store

import (
	"runtime"
	"testing"

	"github.com/uumhq/uum"
)

// BenchmarkUserMemo prints the heap a drainer's memory of user numbers
// (pairLayout) takes at its fullest, two full generations, per user.
func BenchmarkUserMemo(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := &pairLayout{}
		for i := range 2 * userMemo {
			l.addUser(uum.NewUUID(), uint32(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(2*userMemo), "B/user")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		runtime.KeepAlive(l)
	}
}

func TestUserMemoKeepsTwoGenerations(t *testing.T) {
	t.Parallel()
	l := &pairLayout{basis: DrainCommit{Seq: 1, Token: 1}}
	first := uum.NewUUID()
	l.addUser(first, 7)
	for i := range userMemo {
		l.addUser(uum.NewUUID(), uint32(i))
	}
	if len(l.users) != 1 || len(l.oldUsers) != userMemo {
		t.Fatalf("generations of %d and %d, want 1 and %d", len(l.users), len(l.oldUsers), userMemo)
	}
	// A user found in the old generation moves to the current one, so
	// that the next new generation keeps it.
	numbers, missing := l.lookupUsers(&layoutTx{}, []uum.UUID{first})
	if numbers[first] != 7 || len(missing) != 0 {
		t.Fatalf("got %v, missing %v", numbers, missing)
	}
	if _, ok := l.users[first]; !ok {
		t.Fatal("not moved to the current generation")
	}
}
