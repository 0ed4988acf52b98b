package uniqueevents

import (
	"time"
)

// SetClock makes c read the time from now and take days in zone.
func SetClock(c *Client, now func() time.Time, zone *time.Location) {
	c.now, c.reportZone = now, zone
}

// SetMaxEntryBytes lowers the largest entry c pushes, so that tests can
// reach the refusal, which no valid event reaches at uum.MaxEntryBytes.
func SetMaxEntryBytes(c *Client, n int) { c.maxEntry = n }
