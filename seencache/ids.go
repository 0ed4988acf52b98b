package seencache

import (
	"context"
	"fmt"
	"slices"

	"github.com/uumhq/uum"
)

// resolve returns the dictionary id of each pair's name, memoised for
// scope. With register, names new to the dictionary are added to it;
// without, they get -1.
func (c *Cache) resolve(ctx context.Context, scope string, pairs []uum.Pair, register bool) ([]int32, error) {
	out := make([]int32, len(pairs))
	missing := c.fill(out, scope, pairs)
	if len(missing) == 0 {
		return out, nil
	}
	fetch := c.dict.LookupEventIDs
	if register {
		fetch = c.dict.EventIDs
	}
	slices.Sort(missing)
	got, err := fetch(ctx, slices.Compact(missing))
	if err != nil {
		return nil, fmt.Errorf("event name ids: %w", err)
	}
	c.mu.Lock()
	if c.idsScope != scope {
		c.ids, c.idsScope = make(map[string]int32, len(got)), scope
	}
	for n, id := range got {
		c.ids[n] = id
	}
	c.mu.Unlock()
	if missing = c.fill(out, scope, pairs); len(missing) > 0 && register {
		return nil, fmt.Errorf("event name ids: no id for %q", missing[0])
	}
	return out, nil
}

// fill sets out[i] to the id of pairs[i] memoised for scope, or -1, and
// returns the names that have none yet.
func (c *Cache) fill(out []int32, scope string, pairs []uum.Pair) []string {
	var missing []string
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, p := range pairs {
		id, ok := c.ids[p.Name]
		if c.idsScope != scope {
			ok = false
		}
		if !ok {
			id = -1
			missing = append(missing, p.Name)
		}
		out[i] = id
	}
	return missing
}
