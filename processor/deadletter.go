package processor

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/buffer"
	"github.com/uumhq/uum/store"
)

// BareReason is the reason of a bare dead letter (see bare).
const BareReason = "refused by the database even as a dead letter: see raw"

// bare returns d with only what no database refuses: its correlation id,
// its raw bytes and BareReason. The drain stores it when d itself was
// refused, so that no entry can stall the buffer behind it.
func bare(d store.DeadLetter) store.DeadLetter {
	return store.DeadLetter{CorrelationID: d.CorrelationID, Raw: d.Raw, Reason: BareReason}
}

// NewDeadLetter returns the dead letter of the entry raw found at pos,
// with reason. Its correlation id is a digest of both: the same entry
// dead-lettered again (a batch re-run after a crash, by this drainer or
// another) is stored once, while identical bytes pushed twice are two
// entries and two dead letters.
func NewDeadLetter(raw []byte, reason string, pos buffer.Position) store.DeadLetter {
	e, err := uum.DecodeWire(raw)
	return decodedDeadLetter(raw, reason, pos, e, err)
}

// decodedDeadLetter is NewDeadLetter for an entry the drain decoded
// already: e and err are what uum.DecodeWire returned for raw.
func decodedDeadLetter(raw []byte, reason string, pos buffer.Position, e uum.Entry, err error) store.DeadLetter {
	dl := store.DeadLetter{CorrelationID: deadLetterID(raw, pos), Raw: raw, Reason: reason}
	dl.EventName, dl.UserID = describe(e, err)
	return dl
}

// oversizedKept is how much of an oversized entry its dead letter keeps.
const oversizedKept = 4 << 10

// maxBatchBytes ends a batch early when its entries hold this much: with
// entries over uum.MaxEntryBytes cut to oversizedKept, a peeked batch
// holds at most maxBatchBytes whatever the producers wrote, and the peek
// script reads at most that plus one entry (docs/operations.md, "Memory").
const maxBatchBytes = 8 << 20

// peekBound is what one peek may bring into the drainer's memory.
var peekBound = buffer.Bound{MaxEntry: uum.MaxEntryBytes, Keep: oversizedKept, MaxBytes: maxBatchBytes}

// oversized returns the dead letter of an entry larger than
// uum.MaxEntryBytes (a foreign producer's), of which the peek sent only
// kept, its first oversizedKept bytes: never decoded, its reason giving
// its size, so the insert stays far below what Postgres takes in one
// statement. Its correlation id is cutID's, as every run computes it.
func oversized(kept string, c buffer.Cut, pos buffer.Position) store.DeadLetter {
	reason := fmt.Sprintf("entry of %d bytes is over the limit of %d (uum.MaxEntryBytes); raw keeps its first %d bytes",
		c.Size, uum.MaxEntryBytes, len(kept))
	return store.DeadLetter{CorrelationID: cutID(kept, c, pos), Raw: []byte(kept), Reason: reason}
}

// cutID is the correlation id of the dead letter of an entry found at pos,
// of which the peek sent kept, c being the rest: its position names it,
// and its size and first bytes stand for the bytes never read.
func cutID(kept string, c buffer.Cut, pos buffer.Position) string {
	return deadLetterID(fmt.Appendf(nil, "cut:%d:%s", c.Size, kept), pos)
}

// entryID is the correlation id of the dead letter of b's entry i.
func (b *batch) entryID(i int) string {
	if c, ok := b.cuts[i]; ok {
		return cutID(b.raw[i], c, b.at.Add(i))
	}
	return deadLetterID([]byte(b.raw[i]), b.at.Add(i))
}

// deadLetterID returns the correlation id of the dead letter of the entry
// raw found at pos (see NewDeadLetter).
func deadLetterID(raw []byte, pos buffer.Position) string {
	sum := entrySum(raw, pos)
	return "dl_" + hex.EncodeToString(sum[:])
}

// describe extracts what an operator filters dead letters by from an
// entry as the wire codec read it (e and err from uum.DecodeWire, which
// reads what it can of a poison entry too): its event_name if it is a
// string, its user_id if it is a UUID.
func describe(e uum.Entry, err error) (name string, user *uum.UUID) {
	if e.Tracked != nil {
		return "", nil
	}
	if err == nil || e.UserID != (uum.UUID{}) { // a partial read leaves an unread user id zero
		user = &e.UserID
	}
	return e.Name, user
}

// entrySum identifies the entry raw found at pos by a digest of both. A
// re-read of the same entry (a batch re-run after a crash between commit
// and trim, by this drainer or another) has the same sum; identical bytes
// pushed twice are two entries with two sums.
func entrySum(raw []byte, pos buffer.Position) [12]byte {
	h := sha256.New()
	h.Write([]byte(pos.Epoch))
	h.Write(strconv.AppendInt([]byte{0}, pos.Offset, 10))
	h.Write([]byte{0})
	h.Write(raw)
	var sum [12]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// entryTag is the first 8 bytes of entrySum: what the event registry
// keeps to tell a re-read of the registering entry from another delivery.
func entryTag(raw []byte, pos buffer.Position) int64 {
	sum := entrySum(raw, pos)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
