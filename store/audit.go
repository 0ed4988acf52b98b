package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The actions of the audit log (audit_log.action). A new operator action
// gets its constant here, so every writer spells it the same way.
const (
	ActionDLQReplay      = "dlq.replay"      // one dead letter replayed; Params id
	ActionDLQReplayBulk  = "dlq.replay_bulk" // dead letters matching a filter replayed; Params filter, still_invalid, more
	ActionDLQDelete      = "dlq.delete"      // one dead letter deleted; Params id
	ActionDLQDeleteBulk  = "dlq.delete_bulk" // dead letters matching a filter deleted; Params filter
	ActionDLQEdit        = "dlq.edit"        // a dead letter's entry edited (and replayed); Params id
	ActionPause          = "pause"           // draining or ingestion paused; Params what
	ActionResume         = "resume"          // draining or ingestion resumed; Params what
	ActionDrainNow       = "drain_now"       // processors asked to drain at once; Params shard when one
	ActionCountersAccept = "counters.accept" // the counters file accepted; Params fingerprint, previous
)

// Where an action was taken (audit_log.via).
const (
	ViaAPI    = "api"
	ViaUumctl = "uumctl"
)

// Bounds of the audit log, kept by PruneActions from the processor's
// maintenance run: rows older than AuditRetention go, and so do those
// beyond the newest AuditMaxRows.
const (
	AuditRetention = 90 * 24 * time.Hour
	AuditMaxRows   = 100_000
)

// Action is an operator action for the audit log.
type Action struct {
	// Actor is who acted: the API token's name (UUM_API_TOKENS), or
	// "uumctl:<user>" for uumctl.
	Actor string
	// Via is ViaAPI or ViaUumctl.
	Via string
	// Action is one of the Action constants.
	Action string
	// Entries is how many entries (dead letters, buffered entries) the
	// action changed; 0 for one that changes none (pause).
	Entries int64
	// Params are the action's parameters or filter, stored as a JSON
	// object; nil for none.
	Params map[string]any
}

// ActionRecord is a row of the audit log.
type ActionRecord struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Via     string          `json:"via"`
	Action  string          `json:"action"`
	Entries int64           `json:"entries"`
	Params  json.RawMessage `json:"params"`
}

// ActionFilter selects audit rows; zero fields match everything.
type ActionFilter struct {
	Action string // exact action
	Actor  string // exact actor
}

// maxActorText bounds the actor column: a token's name is at most
// config.MaxTokenNameLen, a uumctl user is the environment's.
const maxActorText = 200

// RecordAction appends a to the audit log on db: inside the action's own
// transaction when it has one, so the record commits with the action.
func RecordAction(ctx context.Context, db DBTX, a Action) error {
	params := a.Params
	if params == nil {
		params = map[string]any{}
	}
	js, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("record action %s: params: %w", a.Action, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO audit_log (actor, via, action, entries, params) VALUES ($1, $2, $3, $4, $5)`,
		safeText(a.Actor, maxActorText), a.Via, a.Action, a.Entries, js); err != nil {
		return fmt.Errorf("record action %s: %w", a.Action, interpret(err))
	}
	return nil
}

// RecordAction appends a to the audit log on the primary, for an action
// without a transaction of its own (one in Redis, such as a pause).
func (s *Store) RecordAction(ctx context.Context, a Action) error {
	return RecordAction(ctx, s.pool, a)
}

// Actions returns up to limit audit rows matching f with an id below
// before (0 for the newest), newest first, read from the primary: an
// action shows at once.
func (s *Store) Actions(ctx context.Context, f ActionFilter, before int64, limit int) ([]ActionRecord, error) {
	conds, args := []string{"($1 = 0 OR id < $1)"}, []any{before}
	if f.Action != "" {
		args = append(args, f.Action)
		conds = append(conds, fmt.Sprintf("action = $%d", len(args)))
	}
	if f.Actor != "" {
		args = append(args, f.Actor)
		conds = append(conds, fmt.Sprintf("actor = $%d", len(args)))
	}
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, via, action, entries, params FROM audit_log WHERE `+
		strings.Join(conds, " AND ")+fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", interpret(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ActionRecord])
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", interpret(err))
	}
	return out, nil
}

// PruneActions deletes the audit rows recorded before cutoff and those
// beyond the newest keep, and returns how many it deleted.
func (s *Store) PruneActions(ctx context.Context, cutoff time.Time, keep int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE at < $1
		OR id < (SELECT min(id) FROM (SELECT id FROM audit_log ORDER BY id DESC LIMIT $2) newest)`, cutoff, keep)
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", interpret(err))
	}
	return tag.RowsAffected(), nil
}
