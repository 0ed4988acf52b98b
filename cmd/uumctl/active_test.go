package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uumhq/uum"
	"github.com/uumhq/uum/activeusers"
	"github.com/uumhq/uum/internal/testkit/testenv"
	"github.com/uumhq/uum/internal/testkit/zonetest"
	"github.com/uumhq/uum/store"
)

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	ctx := context.Background()
	// login: users a and b on 2026-01-05, a on the 6th; nothing else.
	require.NoError(t, store.New(stack.Pool).InTx(ctx, func(tx pgx.Tx) error {
		var id int32
		if err := tx.QueryRow(ctx, `INSERT INTO event_names (name) VALUES ('login') RETURNING id`).Scan(&id); err != nil {
			return err
		}
		a, b := uum.NewUUID(), uum.NewUUID()
		n, err := store.UserNumbers(ctx, tx, []uum.UUID{a, b})
		if err != nil {
			return err
		}
		day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
		var sets []store.ActiveUsers
		for _, e := range []int32{id, store.AnyEvent} {
			sets = append(sets,
				store.ActiveUsers{EventID: e, Day: day("2026-01-05"), Users: roaring.BitmapOf(n[a], n[b])},
				store.ActiveUsers{EventID: e, Day: day("2026-01-06"), Users: roaring.BitmapOf(n[a])})
		}
		return store.AddActiveUsers(ctx, tx, sets)
	}))
	rng := []string{"--from", "2026-01-01", "--to", "2026-01-31"}

	out, code := uumctl(t, stack.Env, append([]string{"active-users", "--event", "login", "--json"}, rng...)...)
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `{"event_names":["login"],"from":"2026-01-01","to":"2026-01-31","active_users":2,"partial":false}`, out)

	out, code = uumctl(t, stack.Env, "active-users", "--period", "day", "--from", "2026-01-05", "--to", "2026-01-06")
	require.Equal(t, 0, code, out)
	require.Equal(t, "START       ACTIVE USERS  \n2026-01-05  2             \n2026-01-06  1             \n", out)

	out, code = uumctl(t, stack.Env, "active-users", "--retention", "day", "--periods", "1", "--from", "2026-01-05", "--to", "2026-01-05", "--json")
	require.Equal(t, 0, code, out)
	var m struct {
		Cohorts []struct {
			Users    int `json:"users"`
			Retained []struct {
				Users int `json:"users"`
			} `json:"retained"`
		} `json:"cohorts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Equal(t, 2, m.Cohorts[0].Users)
	require.Equal(t, 1, m.Cohorts[0].Retained[0].Users)

	_, errOut, code := uumctlErr(t, stack.Env, append([]string{"active-users", "--event", "logn"}, rng...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `event "logn" was never seen`)
	_, _, code = uumctlErr(t, stack.Env, append([]string{"active-users", "--period", "day", "--stickiness"}, rng...)...)
	require.Equal(t, 2, code)
	_, errOut, code = uumctlErr(t, stack.Env, append([]string{"active-users", "--period", "year"}, rng...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "period")
}

// TestActiveUsersInReportZone: without --from and --to, the range ends on
// today in UUM_REPORT_TIMEZONE, which is not UTC's date here, and today
// is partial (the API's reads are built by the same app.Producer).
func TestActiveUsersInReportZone(t *testing.T) {
	t.Parallel()
	stack := testenv.New(t)
	ctx := context.Background()
	zoneName, zone := zonetest.OtherDay(t, time.Now())
	stack.Env["UUM_REPORT_TIMEZONE"] = zoneName
	today := activeusers.DayOf(time.Now(), zone)
	require.NoError(t, store.New(stack.Pool).InTx(ctx, func(tx pgx.Tx) error {
		a := uum.NewUUID()
		n, err := store.UserNumbers(ctx, tx, []uum.UUID{a})
		if err != nil {
			return err
		}
		return store.AddActiveUsers(ctx, tx, []store.ActiveUsers{{EventID: store.AnyEvent, Day: today.Date(), Users: roaring.BitmapOf(n[a])}})
	}))
	out, code := uumctl(t, stack.Env, "active-users", "--json")
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `{"event_names":[],"from":"`+(today-29).String()+`","to":"`+today.String()+`","active_users":1,"partial":true}`, out)
}
