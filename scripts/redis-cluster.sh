#!/usr/bin/env bash
# Start or stop a local Redis Cluster of 6 nodes (3 masters, 3 replicas) on
# free loopback ports, for tests and for trying UUM_REDIS_CLUSTER=true.
#
#   scripts/redis-cluster.sh start DIR   start the nodes with their files in DIR (created
#                                        if missing, must hold no cluster yet), wait until
#                                        the cluster answers, print its URL on stdout
#   scripts/redis-cluster.sh stop DIR    stop the nodes that `start DIR` started, and
#                                        nothing else: each pidfile's process is checked
#                                        to be redis-server serving DIR before it is killed
#
# The URL is in go-redis's cluster form (redis.ParseClusterURL):
#   redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=127.0.0.1:P3...
# REDIS_SERVER and REDIS_CLI name the binaries (default: on PATH; scripts/services.sh test
# installs them). Nodes never save (no RDB); AOF is off unless CLUSTER_APPENDONLY=yes.
set -euo pipefail

die() {
	printf 'redis-cluster: error: %s\n' "$*" >&2
	exit 1
}
log() { printf 'redis-cluster: %s\n' "$*" >&2; }

SERVER=${REDIS_SERVER:-redis-server}
CLI=${REDIS_CLI:-redis-cli}
NODES=6

# free_port prints a loopback TCP port nothing listens on. A port can be taken
# between this check and the bind: start retries the node on a new port.
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# node_pid DIR N prints the pid of node N if its pidfile names a live
# redis-server whose working directory is that node's folder.
node_pid() {
	local dir=$1 n=$2 pid
	[[ -f $dir/node$n/pid ]] || return 1
	pid=$(<"$dir/node$n/pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'redis-server' || return 1
	[[ $(readlink "/proc/$pid/cwd") == "$(cd "$dir/node$n" && pwd -P)" ]] || return 1
	echo "$pid"
}

start_node() {
	local dir=$1 n=$2 port
	mkdir -p "$dir/node$n"
	for _ in 1 2 3 4 5; do
		port=$(free_port) || die "no free port found"
		(
			cd "$dir/node$n"
			"$SERVER" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
				--cluster-config-file nodes.conf --cluster-node-timeout 2000 \
				--save "" --appendonly "${CLUSTER_APPENDONLY:-no}" --appendfsync always \
				--daemonize yes --pidfile "$PWD/pid" --logfile "$PWD/log" --dir "$PWD"
		) || continue
		for _ in $(seq 1 100); do
			if "$CLI" -p "$port" ping 2>/dev/null | grep -q PONG; then
				echo "$port" >"$dir/node$n/port"
				return 0
			fi
			sleep 0.1
		done
		log "node $n did not answer on port $port, retrying on another port"
		if pid=$(node_pid "$dir" "$n"); then kill "$pid" 2>/dev/null || true; fi
	done
	die "node $n did not start (see $dir/node$n/log)"
}

cmd_start() {
	local dir=$1 addrs=() url
	command -v "$SERVER" >/dev/null || die "$SERVER not found (scripts/services.sh test installs it)"
	command -v "$CLI" >/dev/null || die "$CLI not found (it comes with redis-server: scripts/services.sh test installs it)"
	mkdir -p "$dir"
	[[ ! -e $dir/node0/nodes.conf ]] || die "$dir already holds a cluster; stop it first"
	for n in $(seq 0 $((NODES - 1))); do
		start_node "$dir" "$n"
		addrs+=("127.0.0.1:$(<"$dir/node$n/port")")
	done
	"$CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed (see $dir/create.log)"
	# create returns once slots are assigned; wait until every node agrees and
	# sees its three replicas, so that a failover test finds one for each master.
	# A deadline, not a count of tries: on a loaded machine each check is slow.
	local deadline=$((SECONDS + ${CLUSTER_START_TIMEOUT:-120}))
	while ((SECONDS < deadline)); do
		local ok=1
		for a in "${addrs[@]}"; do
			"$CLI" -h "${a%:*}" -p "${a#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
			(($("$CLI" -h "${a%:*}" -p "${a#*:}" cluster nodes 2>/dev/null | grep -c slave) == NODES / 2)) || ok=0
		done
		# ...and until each master's replica has finished its first sync.
		(($("$CLI" -h "${addrs[0]%:*}" -p "${addrs[0]#*:}" --cluster call "${addrs[0]}" info replication 2>/dev/null |
			grep -c 'state=online') == NODES / 2)) || ok=0
		if ((ok)); then
			url="redis://${addrs[0]}"
			local sep='?'
			for a in "${addrs[@]:1}"; do
				url+="${sep}addr=$a"
				sep='&'
			done
			echo "$url" >"$dir/url"
			echo "$url"
			return 0
		fi
		sleep 0.1
	done
	die "the cluster did not reach cluster_state:ok (see $dir/node*/log)"
}

cmd_stop() {
	local dir=$1 stopped=0 pid
	[[ -d $dir ]] || {
		log "nothing to stop: $dir does not exist"
		return 0
	}
	for n in $(seq 0 $((NODES - 1))); do
		if pid=$(node_pid "$dir" "$n"); then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 1 100); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.05
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
			stopped=$((stopped + 1))
		fi
	done
	log "stopped $stopped node(s) of $dir"
}

case "${1:-}" in
start) [[ $# == 2 ]] || die "usage: $0 start DIR"; cmd_start "$2" ;;
stop) [[ $# == 2 ]] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
*) die "usage: $0 start DIR | stop DIR" ;;
esac
