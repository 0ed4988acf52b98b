package store

import (
	"time"

	"github.com/uumhq/uum"
)

// DeadLetter is a buffered entry the drain could not process, kept with
// its raw bytes so an operator can inspect and replay it.
type DeadLetter struct {
	CorrelationID string
	Raw           []byte
	Reason        string
	// EventName and UserID are what operators filter dead letters by,
	// taken from Raw as far as it decodes: "" and nil when it does not
	// say. EventName is as found, NUL and all: the store makes every text
	// column safe for Postgres as it writes it.
	EventName string
	UserID    *uum.UUID
}

// Dead-letter statuses. A dead letter is open until it is replayed or
// deleted; closed rows are kept until the retention purge.
const (
	DeadLetterOpen     = "open"
	DeadLetterReplayed = "replayed"
	DeadLetterDeleted  = "deleted"
)

// Dead-letter kinds: a buffered entry the drain could not count, or a
// drain run that failed on every retry (its entries stay buffered).
const (
	DeadLetterKindEntry = "entry"
	DeadLetterKindRun   = "run"
)

// DeadLetterRecord is a row of the dead-letter queue as operators see it.
type DeadLetterRecord struct {
	ID            int64      `json:"id"`
	CorrelationID string     `json:"correlation_id"`
	Kind          string     `json:"kind"`
	Reason        string     `json:"reason"`
	Raw           []byte     `json:"-"`
	EventName     *string    `json:"event_name"`
	UserID        *string    `json:"user_id"`
	OrgID         *string    `json:"org_id"`
	FirstFailedAt time.Time  `json:"first_failed_at"`
	LastFailedAt  time.Time  `json:"last_failed_at"`
	Attempts      int        `json:"attempts"`
	Status        string     `json:"status"`
	ClosedAt      *time.Time `json:"closed_at"`
	// OriginalRaw is the entry as the drain found it when an operator
	// edited Raw (EditDeadLetter), else nil; EditedAt the last edit.
	OriginalRaw []byte     `json:"-"`
	EditedAt    *time.Time `json:"edited_at"`
}

// DeadLetterFilter selects dead letters. Zero fields match everything.
type DeadLetterFilter struct {
	Status        string    // exact status
	Reason        string    // substring of the reason
	EventName     string    // exact event name
	CorrelationID string    // exact correlation id
	From          time.Time // first failure at or after
	To            time.Time // first failure before
	UserID        string    // exact user id (a UUID)
	// Raw is a substring of the raw entry's bytes. Matching it reads the
	// rows, so a walk with Raw looks at no more than DeadLetterScanRows
	// rows (see ScanDeadLetters).
	Raw string
}

// RunFailure is a drain run that failed on its last retry: the task id is
// its correlation id.
type RunFailure struct {
	CorrelationID string
	Reason        string
	Attempts      int
}
