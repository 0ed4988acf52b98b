package testenv

import (
	"net"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// StartAPI starts the api binary at path in the directory dir (the test's
// own when empty) with env on a free loopback port, which it sets as
// env["UUM_API_ADDR"], waits until it answers /healthz and returns its base
// URL. At cleanup it sends SIGTERM and fails the test unless the api exits
// 0 within a minute.
func StartAPI(t testing.TB, path, dir string, env Env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("free port %s: %v", addr, err)
	}
	env["UUM_API_ADDR"] = addr

	cmd := exec.Command(path)
	cmd.Dir = dir
	cmd.Env = env.Environ()
	logs := &Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("api exits 0 on SIGTERM, got %v; logs:\n%s", err, logs.String())
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("api did not exit on SIGTERM; logs:\n%s", logs.String())
		}
	})

	// One connection per request, so no keep-alive goroutine outlives the test.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	base := "http://" + addr
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("api exited at start: %v; logs:\n%s", err, logs.String())
		case <-deadline:
			t.Fatalf("api did not answer /healthz within a minute; logs:\n%s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := client.Get(base + "/healthz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
	}
}
