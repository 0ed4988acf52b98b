package store

import "time"

// SetReplicaClock makes s's replica routing read the time from now.
func SetReplicaClock(s *Store, now func() time.Time) { s.replica.now = now }
