package uum

import "strconv"

// Redis key builders. Every key the project writes comes from here and
// starts with the configured prefix.
//
// The buffer list and its lease share a {hash tag} so the fenced trim
// script, which reads the lease and trims the list, touches one cluster
// slot. The shard number is in the tag so shards spread across slots when
// buffers are sharded over Redis Cluster.

// BufferKey returns the key of the pending-events list of a shard.
func BufferKey(prefix string, shard int) string {
	return prefix + "{buffer:" + strconv.Itoa(shard) + "}:pending"
}

// LeaseKey returns the key of the drain lease of a shard.
func LeaseKey(prefix string, shard int) string {
	return prefix + "{buffer:" + strconv.Itoa(shard) + "}:lease"
}

// SeenKey returns the seen-cache key of a user. The 16 raw UUID bytes,
// not its 36-character text, keep the per-user overhead small; the cache
// holds millions of these.
func SeenKey(prefix string, user UUID) string {
	b := make([]byte, 0, len(prefix)+2+len(user))
	b = append(b, prefix...)
	b = append(b, "s:"...)
	b = append(b, user[:]...)
	return string(b)
}
