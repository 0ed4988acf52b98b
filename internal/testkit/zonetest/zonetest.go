// Package zonetest gives tests of the report time zone (UUM_REPORT_TIMEZONE)
// a zone whose date differs from UTC's at the moment the test runs, so that
// a read that counts days in UTC instead of the zone gives another answer.
// Import it only from _test.go files.
package zonetest

import (
	"testing"
	"time"

	// Both zones must exist on a machine without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// OtherDay returns the name and location of a zone whose date at now is
// not UTC's: Pacific/Kiritimati (UTC+14) from 10:00 UTC on, its date
// then the next day; Etc/GMT+12 (UTC-12) before, its date the day before.
func OtherDay(t testing.TB, now time.Time) (string, *time.Location) {
	t.Helper()
	name := "Etc/GMT+12"
	if now.UTC().Hour() >= 10 {
		name = "Pacific/Kiritimati"
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v", name, err)
	}
	if y, m, d := now.In(loc).Date(); time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Equal(now.UTC().Truncate(24 * time.Hour)) {
		t.Fatalf("zone %s has UTC's date at %s", name, now.UTC())
	}
	return name, loc
}
