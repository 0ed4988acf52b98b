package uniqueevents

// Loggable returns nil if LogEvents could buffer name today: a name the
// policy accepts or a facility variant of one. Otherwise it returns a
// *uum.ValidationError for "event_name" saying why. The drain and the
// dead-letter replay apply it to entries that never went through
// LogEvents.
func (c *Client) Loggable(name string) error {
	return c.loggable("event_name", name)
}

// loggable returns nil if LogEvents could ever buffer name: a name the
// policy accepts, or a facility variant of one (uum.NamePolicy.CheckVariant).
// Otherwise it returns a *uum.ValidationError for field naming name.
func (c *Client) loggable(field, name string) error {
	return c.policy.CheckVariant(field, name)
}
