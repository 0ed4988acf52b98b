//go:build unix

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// countersYAML is the counter file of every drainer: persistent counters
// raw, floored and transition-safe, and a window counter. truth.track
// applies the same definitions on its own.
const countersYAML = `counters:
  - counterName: active_connections
    mode: persistent
    dimensions: [masterAccountId]
    floorAtZero: true
    rules:
      - {on: account.connected, op: increment}
      - {on: account.disconnected, op: decrement}
  - counterName: connected_accounts
    mode: persistent
    dimensions: [masterAccountId]
    transitionSafe: true
    entity: [accountId]
    rules:
      - {on: account.connected, op: increment}
      - {on: account.disconnected, op: decrement}
  - counterName: artifacts_by_site
    mode: persistent
    dimensions: [site]
    rules: [{on: artifact_received, op: increment}]
  - counterName: artifacts_received_1h
    mode: window
    window: 1h
    rules: [{on: artifact_received, op: increment}]
`

// The tracked event types of the workload.
const (
	typeConnected    = "account.connected"
	typeDisconnected = "account.disconnected"
	typeArtifact     = "artifact_received"
)

// rejectedName is a valid event name that the round's database refuses
// (round.refuseInDatabase).
const rejectedName = "chaos_refused"

// pair is a (user, event name) pair.
type pair struct{ user, name string }

// trackedEvent is a tracked event as POST /v1/track takes it.
type trackedEvent struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	OrgID      string            `json:"org_id,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
}

// generator makes a round's workload from the round's random source.
type generator struct {
	rng    *rand.Rand
	round  int
	users  []string
	names  []string
	sent   []trackedEvent // for re-deliveries
	nextID int
	nonce  int
}

func newGenerator(rng *rand.Rand, round, entries int) *generator {
	g := &generator{rng: rng, round: round,
		names: []string{"chaos_a", "chaos_b", "chaos_c", "chaos_d", "chaos_e", "chaos_f"}}
	// About a third as many users as entries: many pairs are pushed twice
	// or more, so the drain has duplicates to drop, in and across batches.
	for range max(entries/3, 1) {
		g.users = append(g.users, g.uuid())
	}
	return g
}

// uuid returns a random version 4 UUID.
func (g *generator) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newUser returns a user never pushed before, whom later pushes may pick.
func (g *generator) newUser() string {
	u := g.uuid()
	g.users = append(g.users, u)
	return u
}

// pairs returns one POST /v1/events: a user and 1-4 distinct names.
func (g *generator) pairs() (string, []string) {
	user := g.users[g.rng.IntN(len(g.users))]
	names := make([]string, 0, 4)
	for _, i := range g.rng.Perm(len(g.names))[:1+g.rng.IntN(4)] {
		names = append(names, g.names[i])
	}
	return user, names
}

// tracked returns one POST /v1/track of 1-5 events; about one in seven is
// a re-delivery of an event sent before (same id, same content), which
// the drain must audit as a duplicate and count once.
func (g *generator) tracked() []trackedEvent {
	out := make([]trackedEvent, 0, 5)
	for range 1 + g.rng.IntN(5) {
		if len(g.sent) > 0 && g.rng.IntN(7) == 0 {
			out = append(out, g.sent[g.rng.IntN(len(g.sent))])
			continue
		}
		g.nextID++
		e := trackedEvent{ID: fmt.Sprintf("r%d-ev-%d", g.round, g.nextID)}
		if org := g.rng.IntN(4); org > 0 {
			e.OrgID = "org-" + strconv.Itoa(org)
		}
		master := "m" + strconv.Itoa(1+g.rng.IntN(4))
		switch k := g.rng.IntN(10); {
		case k < 4:
			e.Type = typeConnected
			e.Dimensions = map[string]string{"masterAccountId": master, "accountId": master + "-a" + strconv.Itoa(g.rng.IntN(4))}
		case k < 6:
			e.Type = typeDisconnected
			e.Dimensions = map[string]string{"masterAccountId": master, "accountId": master + "-a" + strconv.Itoa(g.rng.IntN(4))}
		default:
			e.Type = typeArtifact
			e.Dimensions = map[string]string{"site": "s" + strconv.Itoa(g.rng.IntN(3))}
		}
		g.sent = append(g.sent, e)
		out = append(out, e)
	}
	return out
}

// poison returns one entry the drain must dead-letter, unique (a nonce),
// so its dead letter can be matched to it, and the name of its kind.
func (g *generator) poison() (string, []byte) {
	g.nonce++
	n := strconv.Itoa(g.round) + "-" + strconv.Itoa(g.nonce)
	ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
	kinds := []func() (string, string){
		func() (string, string) { return "invalid-json", `{"v":2,"user_id":"chaos-` + n },
		func() (string, string) { return "not-an-object", `["chaos","` + n + `"]` },
		func() (string, string) { return "invalid-utf8", "\xff\xfe chaos " + n },
		func() (string, string) {
			return "unknown-version", `{"v":7,"user_id":"` + g.uuid() + `","event_name":"chaos_a","buffered_at":` + ms + `,"n":"` + n + `"}`
		},
		func() (string, string) {
			return "bad-uuid", `{"v":2,"user_id":"not-a-uuid-` + n + `","event_name":"chaos_a","buffered_at":` + ms + `}`
		},
		func() (string, string) {
			return "bad-name", `{"v":2,"user_id":"` + g.uuid() + `","event_name":"Bad Name ` + n + `","buffered_at":` + ms + `}`
		},
		// Valid JSON and UTF-8 with a NUL in decoded text, which no
		// Postgres text or jsonb column takes: a dead letter must still
		// be stored, never refused.
		func() (string, string) {
			return "nul-in-dimension", `{"v":2,"id":"r` + n + `-poison","type":"artifact_received","dimensions":{"site":"s\u0000` + n + `"},"buffered_at":` + ms + `}`
		},
		func() (string, string) {
			return "nul-in-dimension-key", `{"v":2,"id":"r` + n + `-poison","type":"artifact_received","dimensions":{"s\u0000":"` + n + `"},"buffered_at":` + ms + `}`
		},
		func() (string, string) {
			return "nul-in-name", `{"user_id":"` + g.uuid() + `","event_name":"a\u0000b` + n + `"}`
		},
		func() (string, string) {
			return "nul-in-key", `{"\u0000":1,"user_id":"not-a-uuid-` + n + `","event_name":"chaos_a"}`
		},
		// Valid to the drain, refused by Postgres: found by bisection.
		func() (string, string) {
			return "refused-by-database", `{"v":2,"user_id":"` + g.uuid() + `","event_name":"` + rejectedName + `","buffered_at":` + ms + `}`
		},
	}
	kind, raw := kinds[g.rng.IntN(len(kinds))]()
	return kind, []byte(raw)
}

// pusher buffers the workload: valid events through the api, as producers
// do, and poison straight into the Redis list, as only a broken producer
// could.
type pusher struct {
	http  *http.Client
	base  string // http://host:port
	token string
	rdb   *redis.Client
	keys  []string // the buffer shards' lists
}

// events is POST /v1/events; an error means the push may or may not have
// buffered the events.
func (p *pusher) events(ctx context.Context, user string, names []string) error {
	body, err := json.Marshal(map[string]any{"user_id": user, "event_names": names})
	if err != nil {
		return err
	}
	return p.post(ctx, "/v1/events", body)
}

// track is POST /v1/track.
func (p *pusher) track(ctx context.Context, events []trackedEvent) error {
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		return err
	}
	return p.post(ctx, "/v1/track", body)
}

func (p *pusher) post(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(got))
	}
	return nil
}

// poison pushes raw straight into shard's list.
func (p *pusher) poison(ctx context.Context, shard int, raw []byte) error {
	if err := p.rdb.LPush(ctx, p.keys[shard], raw).Err(); err != nil {
		return fmt.Errorf("push poison: %w", err)
	}
	return nil
}
