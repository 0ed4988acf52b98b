package processor

import (
	"context"

	"github.com/uumhq/uum/seencache"
)

// rescope follows a commit refused because the database does not hold a
// drain commit the seen-cache's answers stand on (from; cause): the
// database went back in time (a restore, a failover to a lagging
// replica), so pairs the cache calls seen may be missing from it. The
// cache starts a new scope, which it logs and counts, unless another
// process already did; the batch is then committed again without the
// cache's answers, so every pair the database lost counts again, once.
func (d *Drainer) rescope(ctx context.Context, from seencache.Basis, cause error) error {
	started, err := d.seen.Rescope(ctx, from)
	if err != nil {
		return step("rescope", err)
	}
	if !started {
		d.logger.DebugContext(ctx, "seen cache scope already renewed after the database went back", "cause", cause)
		return nil
	}
	if d.pipeline != nil {
		if err := d.pipeline.CountRescope(ctx); err != nil {
			d.metricsFailed(ctx, "count_rescope", err)
		}
	}
	return nil
}
