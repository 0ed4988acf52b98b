package processor

// marker runs the seen-cache marks of committed batches in the
// background, one at a time and in order.
type marker struct {
	done chan struct{}
}

// start waits for the mark in flight, then starts mark.
func (m *marker) start(mark func()) {
	m.wait()
	done := make(chan struct{})
	m.done = done
	go func() {
		defer close(done)
		mark()
	}()
}

// wait returns once no mark is in flight.
func (m *marker) wait() {
	if m.done != nil {
		<-m.done
		m.done = nil
	}
}
