package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	dir = filepath.Join(t.TempDir(), "cluster")
	url, stop, err := StartCluster(dir)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("redistest: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return url, dir
}

// StartCluster starts a cluster as ClusterURL does, with its nodes' files
// in dir, for a cluster that the tests of a package share: their
// TestMain calls stop once they have run. stop stops only the nodes this
// call started, and is safe to call when the start failed.
func StartCluster(dir string) (url string, stop func() error, err error) {
	script, err := clusterScriptPath()
	if err != nil {
		return "", func() error { return nil }, err
	}
	stop = func() error {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("stop cluster: %w: %s", err, out)
		}
		return nil
	}
	server, err := serverBinary()
	if err != nil {
		return "", stop, err
	}
	// The script waits up to 120 s for the cluster to settle; give it margin.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "start", dir)
	cmd.Env = append(os.Environ(), "REDIS_SERVER="+server)
	// A redis-cli beside TEST_REDIS_SERVER is of the same build.
	if cli := filepath.Join(filepath.Dir(server), "redis-cli"); isFile(cli) {
		cmd.Env = append(cmd.Env, "REDIS_CLI="+cli)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", stop, fmt.Errorf("start cluster: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), stop, nil
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

// clusterScriptPath finds scripts/redis-cluster.sh from this file's
// place in the module, so that tests of any package can run it.
func clusterScriptPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the module root")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "redis-cluster.sh")
	if _, err := os.Stat(script); err != nil {
		return "", err
	}
	return script, nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
