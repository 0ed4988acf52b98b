package buffer

// Queued returns how many pushes wait in the queue, not yet in a flush.
func (c *Coalescer) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Queued returns how many pushes wait in the queue, not yet in a flush.
func (s *Sharded) Queued() int { return s.c.Queued() }
