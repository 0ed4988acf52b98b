package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/store"
)

// Option configures a Drainer.
type Option func(*Drainer)

// NameChecker applies the event-name policy; uum.NamePolicy
// satisfies it. Loggable returns an error (a *uum.ValidationError whose
// Reason becomes the dead letter's) if name may not be counted.
type NameChecker interface {
	Loggable(name string) error
}

// WithNames makes the drain dead-letter entries whose name the policy
// does not accept (a producer that bypassed validation, a name since
// removed from UUM_EVENT_NAMES) instead of counting them.
func WithNames(n NameChecker) Option { return func(d *Drainer) { d.names = n } }

// NameRegistry knows the registered event names; *store.Store satisfies
// it. RegisteredNames reports which of names are registered and how many
// are in all.
type NameRegistry interface {
	RegisteredNames(ctx context.Context, names []string) (known map[string]bool, total int64, err error)
}

// WithNameLimit caps the distinct event names the drain registers at max
// (UUM_MAX_EVENT_NAMES): an entry with a new name beyond the cap is
// dead-lettered, not counted, so a producer without an allow-list cannot
// grow the dictionary and the statsd tags without bound. max <= 0 means the
// default, 10,000.
func WithNameLimit(r NameRegistry, max int) Option {
	if max <= 0 {
		max = DefaultMaxEventNames
	}
	return func(d *Drainer) { d.registry, d.maxNames = r, max }
}

// DefaultMaxEventNames is the default cap of WithNameLimit.
const DefaultMaxEventNames = 10_000

// RunFailureRecorder stores drain runs that failed on every retry in the
// dead-letter queue; *store.Store satisfies it.
type RunFailureRecorder interface {
	RecordRunFailure(ctx context.Context, f store.RunFailure) error
}

// WithRunFailures makes HandleError record drain runs that exhausted
// their retries in r.
func WithRunFailures(r RunFailureRecorder) Option { return func(d *Drainer) { d.runs = r } }

// policyReason returns why names rejects name, or "" if it accepts it or
// there is no policy.
func policyReason(names NameChecker, name string) string {
	if names == nil {
		return ""
	}
	err := names.Loggable(name)
	if err == nil {
		return ""
	}
	reason := err.Error()
	if ve, ok := errors.AsType[*uum.ValidationError](err); ok {
		reason = ve.Reason
	}
	if uum.ValidateName("event_name", name) != nil {
		return reason // its syntax: the same on every drainer
	}
	return reason + refusedBy(names)
}

// allowList is what a name checker tells of the names it accepts;
// uum.NamePolicy has it.
type allowList interface {
	Allowed() []string
}

// maxPolicyText bounds the allow-list a dead letter's reason shows.
const maxPolicyText = 240

// refusedBy names the drainer that refused a valid name, and the names
// its policy lists: drainers started with different UUM_EVENT_NAMES
// (one not restarted after a change) refuse different names, and the
// reason tells the operator which one to fix.
func refusedBy(names NameChecker) string {
	s := ": refused by drainer " + buffer.Self()
	l, ok := names.(allowList)
	if !ok {
		return s
	}
	allowed := l.Allowed()
	if allowed == nil {
		return s
	}
	list := strings.Join(allowed, ", ")
	if len(list) > maxPolicyText {
		list = list[:strings.LastIndex(list[:maxPolicyText], ", ")] + ", …"
	}
	return fmt.Sprintf("%s, whose UUM_EVENT_NAMES lists %d names: %s", s, len(allowed), list)
}

// HandleError is the asynq error handler of drain tasks: a run that
// failed its last retry becomes a dead letter whose correlation id is the
// task id. Its entries stay buffered for the next scheduled run; the row
// makes the failure visible after asynq's archive forgets it.
func (d *Drainer) HandleError(ctx context.Context, t *asynq.Task, err error) {
	if errors.Is(err, context.Canceled) {
		return // a shutdown: asynq retries it without counting
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	if retried < maxRetry && !errors.Is(err, asynq.SkipRetry) {
		return
	}
	d.logger.ErrorContext(ctx, "drain run failed on its last retry", "task_id", id, "attempts", retried+1, "error", err)
	if d.runs == nil {
		return
	}
	rctx, cancel := detach(ctx, finishTimeout)
	defer cancel()
	f := store.RunFailure{CorrelationID: "task_" + id, Reason: err.Error(), Attempts: retried + 1}
	if rerr := d.runs.RecordRunFailure(rctx, f); rerr != nil {
		d.logger.ErrorContext(ctx, "record failed drain run", "task_id", id, "error", rerr)
		return
	}
	_ = d.stats.Incr(MetricDeadLettered, []string{"kind:run"}, 1) // statsd is best-effort UDP
}
