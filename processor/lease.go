package processor

import (
	"context"
	"errors"
	"time"

	"github.com/uumhq/uum/buffer"
)

// detach returns a context that keeps ctx's values but not its
// cancellation, bounded by timeout: for the work that must finish even
// when the run is being cancelled.
func detach(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// shuttingDown reports whether err ends the run because the caller
// cancelled ctx. A deadline is not a shutdown.
func shuttingDown(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
}

// keepLease renews the lease every renewEvery until stopped, each renewal
// bounded by that interval so a slow one cannot delay the next. If the
// lease is lost, the returned context is cancelled with buffer.ErrFenceLost.
func (d *Drainer) keepLease(ctx context.Context, lease *buffer.Lease) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		every := renewEvery(lease.TTL())
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := renew(ctx, lease, every); errors.Is(err, buffer.ErrFenceLost) {
					cancel(buffer.ErrFenceLost)
					return
				} else if err != nil {
					d.logger.WarnContext(ctx, "renew drain lease", "error", err)
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		<-stopped
		cancel(nil)
	}
}
