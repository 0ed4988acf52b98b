package api

import "time"

// WithNow makes the handler read the clock from now: the window reads'
// current minute.
func WithNow(now func() time.Time) Option { return func(s *server) { s.now = now } }
