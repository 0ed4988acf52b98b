package buffer

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Bound limits what Lease.PeekBounded reads, whatever a producer wrote:
// Redis lists have no command that tells an element's size without
// copying it, so the peek script reads the entries inside Redis and sends
// only what the bound lets through. Zero fields mean no limit.
type Bound struct {
	// MaxEntry and Keep: an entry of more than MaxEntry bytes is sent cut
	// to its first Keep bytes, its whole size in Batch.Cuts.
	MaxEntry, Keep int
	// MaxBytes ends the batch before the entry whose whole size would take
	// what the script read past MaxBytes; a batch holds at least one
	// entry. It bounds the script's work (Redis runs nothing else
	// meanwhile) as well as what is sent: at most MaxBytes, or one entry
	// cut to Keep, or one entry of at most MaxEntry.
	MaxBytes int
}

// Cut describes an entry PeekBounded sent cut short.
type Cut struct {
	// Size is the whole entry's size in bytes.
	Size int
}

// Batch is what PeekBounded read.
type Batch struct {
	// At is the position of Entries[0].
	At Position
	// Entries are oldest first; the cut ones hold their first Bound.Keep
	// bytes.
	Entries []string
	// Cuts are the cut entries, by index in Entries; nil when none.
	Cuts map[int]Cut
}

// readChunk is how many entries the peek script asks LRANGE for at a time
// under a bound, so that Redis copies at most that many entries into the
// script's memory at once, not a whole batch of a foreign producer's.
const readChunk = 16

// peekScript reads entries and the cursor they start at in one step, and
// only while the lease holds our token: a drainer frozen past its lease
// (SIGSTOP, a GC pause) must not read entries another drainer has moved
// and label them with the positions it remembered. A position names an
// entry in correlation ids and in the event registry, so a wrong one
// stores a dead letter twice or audits a redelivery that never happened.
// It reads chunks of ARGV[8] entries, oldest first (one at a time after
// an entry over the bound: more may follow), and applies the
// Bound: an entry over ARGV[5] bytes (0: no limit) is sent as its first
// ARGV[6] bytes, and the batch ends before the entry that would take the
// bytes read past ARGV[7] (0: no limit). KEYS[1] lease key, KEYS[2] list
// key, KEYS[3] cursor key; ARGV[1] token, ARGV[2] epoch, ARGV[3] skip,
// ARGV[4] n. Returns -1 if the lease is not ours, -2 if the cursor is not
// of our epoch, else {trimmed, entries, cuts} with the entries oldest
// first and cuts a flat list of (index from 0, size) per cut entry.
var peekScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local c = redis.call('HMGET', KEYS[3], 'epoch', 'trimmed')
if c[1] ~= ARGV[2] then return -2 end
local skip, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local maxEntry, keep, maxBytes, chunk = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local out, cuts, bytes, read = {}, {}, 0, 0
while read < n do
  local m = math.min(chunk, n - read)
  local vals = redis.call('LRANGE', KEYS[2], -(skip + read + m), -(skip + read + 1))
  for j = #vals, 1, -1 do
    local v = vals[j]
    vals[j] = false
    local size = #v
    if maxBytes > 0 and #out > 0 and bytes + size > maxBytes then
      return {c[2] or '0', out, cuts}
    end
    if maxEntry > 0 and size > maxEntry then
      cuts[#cuts + 1] = #out
      cuts[#cuts + 1] = size
      v = string.sub(v, 1, keep)
      chunk = 1
    end
    out[#out + 1] = v
    bytes = bytes + size
  end
  if #vals < m then break end
  read = read + m
end
return {c[2] or '0', out, cuts}`)

// PeekBounded returns up to n of the oldest entries, oldest first, after
// skipping the skip oldest ones, with the position of the first one, read
// in one step under the fence and within b: fewer than n when b.MaxBytes
// ends the batch, cut entries described in Batch.Cuts. It removes
// nothing; Trim does, once the entries are committed. Skipping lets a
// drainer read the next batch while the previous one is still being
// committed. It returns ErrFenceLost, reading nothing, if the lease is no
// longer ours.
func (le *Lease) PeekBounded(ctx context.Context, skip, n int, b Bound) (Batch, error) {
	at := le.tail.Add(skip)
	if n <= 0 {
		return Batch{At: at}, nil
	}
	chunk := n
	if b != (Bound{}) {
		chunk = min(n, readChunk)
	}
	keys := []string{le.list.leaseKey, le.list.key, le.list.cursorKey}
	res, err := peekScript.Run(ctx, le.list.rdb, keys, le.token, le.tail.Epoch, skip, n,
		max(b.MaxEntry, 0), max(b.Keep, 0), max(b.MaxBytes, 0), chunk).Result()
	if err != nil {
		return Batch{At: at}, fmt.Errorf("peek buffer: %w", err)
	}
	return le.peeked(res, skip)
}

// peeked decodes peekScript's reply.
func (le *Lease) peeked(res any, skip int) (Batch, error) {
	at := le.tail.Add(skip)
	switch res {
	case int64(-1):
		return Batch{At: at}, fmt.Errorf("peek buffer: %w", ErrFenceLost)
	case int64(-2):
		return Batch{At: at}, fmt.Errorf("peek buffer: cursor %s is not of epoch %s: %w", le.list.cursorKey, le.tail.Epoch, ErrFenceLost)
	}
	reply, ok := res.([]any)
	if !ok || len(reply) != 3 {
		return Batch{At: at}, fmt.Errorf("peek buffer: unexpected reply %v", res)
	}
	trimmed, err := strconv.ParseInt(fmt.Sprint(reply[0]), 10, 64)
	if err != nil {
		return Batch{At: at}, fmt.Errorf("peek buffer: cursor %s trimmed=%v: %w", le.list.cursorKey, reply[0], err)
	}
	vals, _ := reply[1].([]any)
	batch := Batch{At: Position{Epoch: le.tail.Epoch, Offset: trimmed + int64(skip)}, Entries: make([]string, len(vals))}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			return Batch{At: at}, fmt.Errorf("peek buffer: entry %d is %T, not a string", i, v)
		}
		batch.Entries[i] = s
	}
	if batch.Cuts, err = cuts(reply[2]); err != nil {
		return Batch{At: at}, err
	}
	return batch, nil
}

// cuts decodes the script's flat list of (index, size).
func cuts(v any) (map[int]Cut, error) {
	flat, _ := v.([]any)
	if len(flat) == 0 {
		return nil, nil
	}
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("peek buffer: cut list of %d items", len(flat))
	}
	out := make(map[int]Cut, len(flat)/2)
	for k := 0; k < len(flat); k += 2 {
		i, ok1 := flat[k].(int64)
		size, ok2 := flat[k+1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("peek buffer: unexpected cut %v", flat[k:k+2])
		}
		out[int(i)] = Cut{Size: int(size)}
	}
	return out, nil
}
