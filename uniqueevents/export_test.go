package uniqueevents

import (
	"time"
)

// SetClock makes c read the time from now and take days in zone.
func SetClock(c *Client, now func() time.Time, zone *time.Location) {
	c.now, c.reportZone = now, zone
}
