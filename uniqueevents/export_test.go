package uniqueevents

import (
	"time"

	"github.com/uumhq/uum/activeusers"
)

// SetClock makes c read the time from now and take days in zone.
func SetClock(c *Client, now func() time.Time, zone *time.Location) {
	c.now, c.reportZone = now, zone
}

// SetMaxEntryBytes lowers the largest entry c pushes, so that tests can
// reach the refusal, which no valid event reaches at uum.MaxEntryBytes.
func SetMaxEntryBytes(c *Client, n int) { c.maxEntry = n }

// SetActiveCache gives c a cache of closed days' sets of maxBytes (0:
// none, every read from the store).
func SetActiveCache(c *Client, maxBytes int64) {
	c.activeCache = activeusers.NewCache(maxBytes)
}

// SetStoredUnions makes c read the unions of closed weeks and months the
// store keeps (on, the default) or their days instead (off).
func SetStoredUnions(c *Client, on bool) { c.noStoredUnions = !on }
