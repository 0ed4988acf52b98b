package redistest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster starts a Redis Cluster of the test's own (3 masters, 3 replicas on
// free loopback ports, scripts/redis-cluster.sh) and returns its options,
// parsed from the cluster URL the script prints, as UUM_REDIS_URL would hold
// it. The nodes are stopped when the test ends. Starting one takes a few
// seconds: share it between the subtests of one test.
func Cluster(t testing.TB) *redis.ClusterOptions {
	t.Helper()
	url, _ := ClusterURL(t)
	opts, err := redis.ParseClusterURL(url)
	if err != nil {
		t.Fatalf("redistest: parse cluster URL %q: %v", url, err)
	}
	opts.ContextTimeoutEnabled = true
	return opts
}

// ClusterURL is Cluster for tests that hand the URL to a binary; it also
// returns the folder holding each node's files (node0..node5, each with
// its port and pid), for tests that kill a node.
func ClusterURL(t testing.TB) (url, dir string) {
	t.Helper()
	script := clusterScript(t)
	dir = filepath.Join(t.TempDir(), "cluster")
	// The script waits up to 120 s for the cluster to settle; give it margin.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "start", dir)
	cmd.Env = append(os.Environ(), "REDIS_SERVER="+serverPath(t))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		stop := exec.Command(script, "stop", dir)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("redistest: stop cluster: %v: %s", err, out)
		}
	})
	if err := cmd.Run(); err != nil {
		t.Fatalf("redistest: start cluster: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), dir
}

// WaitClusterOK waits until every node of opts answers CLUSTER INFO with
// cluster_state:ok, as after a failover.
func WaitClusterOK(t testing.TB, c *redis.ClusterClient, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		info, err := c.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster not ok after %v: %v %s", within, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterScript finds scripts/redis-cluster.sh from this file's place in
// the module, so that tests of any package can run it.
func clusterScript(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("redistest: cannot locate the module root")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "redis-cluster.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return script
}
