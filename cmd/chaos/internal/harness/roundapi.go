//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// startAPI starts the api (which migrates the round's schema) and waits
// until it listens.
func (r *round) startAPI(ctx context.Context) error {
	p, err := spawn(r.h.apiBin, nil, r.env, filepath.Join(r.logDir, "api.log"), nil, apiReady)
	if err != nil {
		return err
	}
	r.apiMu.Lock()
	r.api = p
	r.apiMu.Unlock()
	return waitLine(ctx, p, apiReady)
}

// killAPI kills the api with SIGKILL and starts another on the same
// address: a push it had answered 202 must be buffered, one it had not
// answered is retried by the producer.
func (r *round) killAPI(ctx context.Context) bool {
	r.apiMu.Lock()
	p := r.api
	r.apiMu.Unlock()
	if p == nil || !p.signal(syscall.SIGKILL) {
		return false
	}
	<-p.done
	var errs []error
	for range 3 {
		err := r.startAPI(ctx)
		if err == nil || ctx.Err() != nil {
			return true
		}
		errs = append(errs, err)
	}
	r.fail(fmt.Errorf("restart the api: %w", errors.Join(errs...)))
	return true
}

// stopAPI stops the api, if it runs.
func (r *round) stopAPI() {
	r.apiMu.Lock()
	defer r.apiMu.Unlock()
	if r.api != nil {
		r.api.terminate(stopGrace)
	}
}

// waitLine waits until p writes a line holding marker, one of those spawn
// was given (a server's or the api's "ready"), at most serverStart.
func waitLine(ctx context.Context, p *proc, marker string) error {
	lines := p.lines[marker]
	timer := time.NewTimer(serverStart)
	defer timer.Stop()
	select {
	case <-lines:
		return nil
	case <-p.done:
		// The line may have come just before the exit.
		select {
		case <-lines:
			return nil
		default:
		}
		return fmt.Errorf("%s exited before %q: %v (log %s)", filepath.Base(p.name), marker, p.err, p.log.Name())
	case <-timer.C:
		return fmt.Errorf("%s: no %q within %s (log %s)", filepath.Base(p.name), marker, serverStart, p.log.Name())
	case <-ctx.Done():
		return ctx.Err()
	}
}
