package config

import (
	"errors"
	"strings"
	"time"

	// The zone database inside the binaries: a slim container image has
	// no /usr/share/zoneinfo, and UUM_REPORT_TIMEZONE must mean the same
	// wherever the drain and the API run.
	_ "time/tzdata"
)

// ActiveUsers configures the sets of active users per day.
type ActiveUsers struct {
	// ReportTimezone is the IANA time zone whose calendar days the drain
	// files active users under and the reads count in; empty is UTC.
	ReportTimezone string `env:"UUM_REPORT_TIMEZONE" envDefault:"UTC" desc:"IANA time zone (Europe/Berlin, America/New_York, UTC) whose calendar days active users are counted in. Changing it files later events under the new zone's days; days already recorded keep the users they have."`
}

// Location returns the report time zone: UTC when ReportTimezone is empty
// or not a zone (Load refuses one that is not).
func (a ActiveUsers) Location() *time.Location {
	loc, err := loadZone(a.ReportTimezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// loadZone loads an IANA zone name, refusing "Local": the machine's own
// zone would make the API and the drain disagree on different hosts.
func loadZone(name string) (*time.Location, error) {
	if strings.EqualFold(name, "Local") {
		return nil, errLocalZone
	}
	return time.LoadLocation(name)
}

var errLocalZone = errors.New("the machine's own zone")

func (a ActiveUsers) validate(r *report) {
	_, err := loadZone(a.ReportTimezone)
	r.check("UUM_REPORT_TIMEZONE", err == nil, "must be an IANA time zone name such as UTC or Europe/Berlin (not Local)")
}
