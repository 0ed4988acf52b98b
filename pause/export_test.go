package pause

import "time"

// SetNow replaces the switch's clock.
func (s *Switch) SetNow(now func() time.Time) { s.now = now }
