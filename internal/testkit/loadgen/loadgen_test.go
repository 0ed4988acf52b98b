package loadgen_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uumhq/uum/internal/testkit/loadgen"
)

func TestRunMakesEveryCallOnSchedule(t *testing.T) {
	var calls atomic.Int64
	start := time.Now()
	r := loadgen.Run(4, 100, 40, func() error {
		if calls.Add(1)%10 == 0 {
			return errors.New("boom")
		}
		return nil
	})
	if got := calls.Load(); got != 40 {
		t.Fatalf("calls = %d, want 40", got)
	}
	if len(r.Latency) != 40 || len(r.Sched) != 40 || len(r.Call) != 40 {
		t.Fatalf("latencies = %d/%d/%d, want 40 each", len(r.Latency), len(r.Sched), len(r.Call))
	}
	if r.Errors != 4 {
		t.Errorf("errors = %d, want 4", r.Errors)
	}
	// 10 calls per worker 10ms apart: the last is due 90ms in.
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Errorf("run took %s, want at least 90ms: calls did not wait for their schedule", took)
	}
}

// A call slower than the interval delays the next ones; their latency
// must count from when they were due, not from when they got to run.
func TestRunCountsQueueingBehindASlowCall(t *testing.T) {
	var n atomic.Int64
	r := loadgen.Run(1, 100, 5, func() error {
		if n.Add(1) == 1 {
			time.Sleep(45 * time.Millisecond) // the next four are due at 10, 20, 30, 40ms
		}
		return nil
	})
	// The second call started ~35ms after it was due and took ~0: its
	// latency is the wait, its call time is not.
	if got := loadgen.Percentile(r.Latency, 0.5); got < 15*time.Millisecond {
		t.Errorf("median latency = %s, want >= 15ms: queueing behind the slow call was not counted", got)
	}
	if got := loadgen.Percentile(r.Call, 0.5); got > 5*time.Millisecond {
		t.Errorf("median call time = %s, want ~0", got)
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}} {
		if got := loadgen.Percentile(d, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := loadgen.Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %d, want 0", got)
	}
}
