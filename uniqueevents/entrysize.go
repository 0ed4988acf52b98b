package uniqueevents

import "fmt"

// EntryTooLargeError is returned by LogEvents and Track, which then buffer
// nothing, for an event whose buffer entry would be larger than
// uum.MaxEntryBytes: the drain would dead-letter it, so an event accepted
// would not be an event counted. Validation keeps every valid event well
// below the limit (the largest valid tracked event encodes to under
// 80 KiB); this check holds that promise at the door should a limit grow.
type EntryTooLargeError struct {
	// Field names the event: "events[3]" for Track, "event_names" for
	// LogEvents.
	Field string
	// Size is the entry's size in bytes, Limit the largest allowed.
	Size, Limit int
}

func (e *EntryTooLargeError) Error() string {
	return fmt.Sprintf("uum: %s: buffer entry of %d bytes is over the limit of %d bytes", e.Field, e.Size, e.Limit)
}

// tooLarge reports whether entry is over c's limit.
func (c *Client) tooLarge(entry []byte) bool { return len(entry) > c.maxEntry }

// entryError is the *EntryTooLargeError of entry, which the event named
// by field encodes to.
func (c *Client) entryError(field string, entry []byte) error {
	return &EntryTooLargeError{Field: field, Size: len(entry), Limit: c.maxEntry}
}
