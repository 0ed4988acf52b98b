// Package rediskey builds every Redis key uum writes. Each key starts with
// the configured prefix.
//
// The buffer list, its lease and its cursor share a {hash tag} so the
// fenced trim script, which reads the lease, trims the list and advances
// the cursor, touches one cluster slot. The shard number is in the tag so
// shards spread across slots when buffers are sharded over Redis Cluster.
package rediskey

import "strconv"

// Buffer returns the key of the pending-events list of a shard.
func Buffer(prefix string, shard int) string {
	return prefix + "{buffer:" + strconv.Itoa(shard) + "}:pending"
}

// Lease returns the key of the drain lease of a shard.
func Lease(prefix string, shard int) string {
	return prefix + "{buffer:" + strconv.Itoa(shard) + "}:lease"
}

// Cursor returns the key of a shard's cursor: a hash holding the shard's
// epoch and the number of entries ever trimmed from it, which together
// give every buffered entry a stable buffer.Position.
func Cursor(prefix string, shard int) string {
	return prefix + "{buffer:" + strconv.Itoa(shard) + "}:cursor"
}

// Seen returns the seen-cache hash of one bucket of users in one
// generation, for the database and cache epoch named by scope. Users are
// spread over buckets so each hash stays small enough for Redis's compact
// listpack encoding, where a user costs ~20 bytes against ~150 for a key
// of its own. The {hash tag} holds the scope and the bucket's group
// (bucket mod groups) but not the generation, so a script can move a user
// between generations, and write many users of a group, atomically.
func Seen(prefix, scope string, generation int64, bucket, groups uint32) string {
	return string(AppendSeen(nil, prefix, scope, generation, bucket, groups))
}

// AppendSeen appends Seen's key to b: the seen-cache builds a batch's
// thousands of keys in one buffer.
func AppendSeen(b []byte, prefix, scope string, generation int64, bucket, groups uint32) []byte {
	b = append(append(append(b, prefix...), "s:{"...), scope...)
	b = strconv.AppendUint(append(b, ':'), uint64(bucket%groups), 10)
	b = strconv.AppendInt(append(b, "}:"...), generation, 10)
	return strconv.AppendUint(append(b, ':'), uint64(bucket), 10)
}

// SeenReset returns the string key announcing the seen-cache's epoch
// after a reset, which every cache read fetches to notice one.
func SeenReset(prefix string) string { return prefix + "s:reset" }

// SeenHeads returns the set key holding the heads of the seen-cache of
// scope: the drain commits ("seq:token") its pairs were marked under that
// no read has vouched for since. Its {hash tag} is the scope alone: it is
// read and written beside the buckets, never in their scripts.
func SeenHeads(prefix, scope string) string {
	return prefix + "s:{" + scope + "}:heads"
}

// Pauses returns the hash of what operators paused: field "drain" or
// "ingest", value the JSON of who paused it and when (pause.Entry). A
// field is there while its part is paused; the hash never expires.
func Pauses(prefix string) string { return prefix + "control:pauses" }
