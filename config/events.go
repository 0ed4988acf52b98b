package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/uumhq/uum"
)

// Events configures the logging of events on the request path.
type Events struct {
	// Disabled turns event logging off: logging then validates its input
	// and buffers nothing. It is set by UUM_ENABLED=false; its zero value
	// keeps logging on, the documented default.
	Disabled bool `env:"UUM_ENABLED" envDefault:"true" invert:"true" bin:"api" desc:"Whether events are logged (true/false, 1/0, yes/no)."`
	// Names is the allow-list of event names; empty allows any valid name.
	Names []string `env:"UUM_EVENT_NAMES" desc:"Comma-separated allowed event names; empty allows any valid name."`
	// TrackedFacilityIDs are the 3-digit Oracle Health facility ids that get
	// facility variants of events, in the configured order.
	TrackedFacilityIDs []string `env:"UUM_TRACKED_FACILITY_IDS" desc:"Comma-separated 3-digit facility ids that get facility variants."`
	// FacilityTrackedEvents are the event names that get facility
	// variants, each at most MaxFacilityTrackedEventLen characters.
	FacilityTrackedEvents []string `env:"UUM_FACILITY_TRACKED_EVENTS" desc:"Comma-separated event names (at most 38 characters) that get facility variants."`
	// PushTimeout bounds the Redis push of one logging call; zero means
	// 50ms.
	PushTimeout time.Duration `env:"UUM_PUSH_TIMEOUT" envDefault:"50ms" bin:"api" desc:"Time limit of the Redis push of one logging call."`
	// ReadTimeout bounds each Redis call of a lookup (the seen-cache read
	// and write-back of EventLogged); past it the lookup asks Postgres.
	// Zero means 100ms.
	ReadTimeout time.Duration `env:"UUM_READ_TIMEOUT" envDefault:"100ms" bin:"api" desc:"Time limit of each Redis call of an event lookup; past it the lookup asks Postgres."`
}

// MaxFacilityTrackedEventLen is the longest event name that can get
// facility variants: its longest variant, "<name>_oh_site_<3 digits>",
// must still fit uum.MaxNameLen.
const MaxFacilityTrackedEventLen = uum.MaxNameLen - len("_oh_site_000")

func (e Events) validate(r *report) {
	// Only a value parseBool rejected fails this check.
	r.check("UUM_ENABLED", true, "must be true, false, 1, 0, yes or no")
	validateNames(r, "UUM_EVENT_NAMES", e.Names)
	for _, id := range e.TrackedFacilityIDs {
		if uum.ValidateFacilityID("", id) != nil {
			r.fail("UUM_TRACKED_FACILITY_IDS", fmt.Sprintf("invalid facility id %q: must be 3 digits", id))
		}
	}
	validateNames(r, "UUM_FACILITY_TRACKED_EVENTS", e.FacilityTrackedEvents)
	for _, n := range e.FacilityTrackedEvents {
		if len(n) > MaxFacilityTrackedEventLen && uum.ValidateName("", n) == nil {
			r.fail("UUM_FACILITY_TRACKED_EVENTS", fmt.Sprintf(
				"event name %q is %d characters: a tracked event must be at most %d, so that its facility variant %q fits the %d-character limit",
				n, len(n), MaxFacilityTrackedEventLen, n+"_oh_site_757", uum.MaxNameLen))
		}
	}
	r.check("UUM_PUSH_TIMEOUT", e.PushTimeout > 0, "must be a positive duration")
	r.check("UUM_READ_TIMEOUT", e.ReadTimeout > 0, "must be a positive duration")
}

func validateNames(r *report, name string, names []string) {
	for _, n := range names {
		var ve *uum.ValidationError
		if err := uum.ValidateName(name, n); errors.As(err, &ve) {
			r.fail(name, fmt.Sprintf("invalid event name %q: %s", n, ve.Reason))
		}
	}
}
