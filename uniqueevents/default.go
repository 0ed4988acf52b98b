package uniqueevents

import (
	"context"
	"sync/atomic"
)

var defaultClient atomic.Pointer[Client]

// SetDefault makes c the client the package-level functions use, like
// slog.SetDefault.
func SetDefault(c *Client) { defaultClient.Store(c) }

// Default returns the default client, or nil before SetDefault.
func Default() *Client { return defaultClient.Load() }

// LogEvents calls LogEvents on the default client.
func LogEvents(ctx context.Context, user User, names []string, opts ...Option) ([]string, error) {
	return Default().LogEvents(ctx, user, names, opts...)
}

// LogEvent calls LogEvent on the default client.
func LogEvent(ctx context.Context, user User, name string, opts ...Option) ([]string, error) {
	return Default().LogEvent(ctx, user, name, opts...)
}

// EventLogged calls EventLogged on the default client.
func EventLogged(ctx context.Context, userID, name string) (bool, error) {
	return Default().EventLogged(ctx, userID, name)
}
