package store

import "time"

// SetReplicaClock makes s's replica routing read the time from now.
func SetReplicaClock(s *Store, now func() time.Time) { s.replica.now = now }

// WindowSumSQL is the window read's query, for the test of its plan.
const WindowSumSQL = windowSumSQL
