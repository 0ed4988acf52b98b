package buffer

import "errors"

// Position locates an entry in everything ever pushed to one buffer shard:
// the shard's epoch (random, made when its cursor was created) and the
// number of entries trimmed from the shard before it. Only fenced trims
// remove entries and each adds its count to the cursor atomically, so an
// entry keeps its position for as long as it is buffered, whoever drains.
type Position struct {
	Epoch  string
	Offset int64
}

// Add returns the position n entries later.
func (p Position) Add(n int) Position { return Position{Epoch: p.Epoch, Offset: p.Offset + int64(n)} }

// Errors of the drain lease.
var (
	// ErrLeaseHeld is returned when another drainer holds the buffer lease.
	ErrLeaseHeld = errors.New("uum: drain lease held by another drainer")
	// ErrFenceLost is returned when a fenced write finds the lease no longer
	// holds our token: another drainer owns the buffer now.
	ErrFenceLost = errors.New("uum: drain lease lost")
)
