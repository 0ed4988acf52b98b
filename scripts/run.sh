#!/usr/bin/env bash
# Run the whole service locally: make sure PostgreSQL and Redis are up
# (scripts/services.sh), build cmd/api, cmd/processor and cmd/uumctl into
# .bin/, run the processor and the API side by side, and stop both when
# either exits or on Ctrl-C / SIGTERM (a second Ctrl-C kills them). Exits non-zero if either
# fails. Configuration comes from the UUM_* environment variables.

# Written for bash 3.2 up to here, so old shells reach the message
# (wait -n -p below needs 5.1).
if [ -z "${BASH_VERSINFO:-}" ] || ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
	echo "run: error: needs bash 5.1 or newer (this is ${BASH_VERSION:-not bash}); on macOS: brew install bash, then run it again from a new terminal" >&2
	exit 1
fi
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf 'run: %s\n' "$*" >&2; }

# is_loopback_addr HOST:PORT: the API would listen on loopback only.
is_loopback_addr() {
	local host=${1%:*}
	host=${host#[}
	host=${host%]}
	case $host in
	localhost | 127.* | ::1) return 0 ;;
	esac
	return 1
}

export UUM_DATABASE_URL="${UUM_DATABASE_URL:-postgres://127.0.0.1:5432/uum?sslmode=disable}"
export UUM_REDIS_URL="${UUM_REDIS_URL:-redis://127.0.0.1:6379/0}"
if [[ -z ${UUM_API_TOKENS+set} ]]; then
	# The development token is public (it is in the README): never on an
	# address others can reach.
	if ! is_loopback_addr "${UUM_API_ADDR:-127.0.0.1:8080}"; then
		log "error: UUM_API_ADDR=$UUM_API_ADDR is not a loopback address, and UUM_API_TOKENS is unset:"
		log "  the development admin token is public, so it is only used on loopback."
		log "  Set UUM_API_TOKENS (scope:token pairs), or listen on 127.0.0.1."
		exit 2
	fi
	export UUM_API_TOKENS="admin:dev-admin-token-change-me"
	log "UUM_API_TOKENS is unset: using the development token, try"
	log "  curl -H 'Authorization: Bearer dev-admin-token-change-me' http://${UUM_API_ADDR:-127.0.0.1:8080}/v1/..."
fi

if [[ -z ${UUM_COUNTERS_FILE+set} ]]; then
	# The walkthrough's counters; every drainer needs the same file, so the
	# README has the second terminal export it too.
	export UUM_COUNTERS_FILE=counters.example.yaml
	log "UUM_COUNTERS_FILE is unset: using counters.example.yaml"
fi

scripts/services.sh run

GO=${GO:-go}
mkdir -p .bin
log "building .bin/api, .bin/processor and .bin/uumctl"
"$GO" build -o .bin/ ./cmd/api ./cmd/processor ./cmd/uumctl

# Each child gets its own process group (set -m), so a Ctrl-C in the
# terminal reaches only this script, which forwards one SIGTERM to each.
declare -A name=()
pids=()
stopping=0
set -m
.bin/processor &
name[$!]=processor
pids+=($!)
.bin/api &
name[$!]=api
pids+=($!)
set +m
log "started processor (pid ${pids[0]}) and api (pid ${pids[1]}); Ctrl-C stops both"

stop_all() { # SIGNAL
	local pid
	for pid in "${pids[@]}"; do
		kill -"$1" "$pid" 2>/dev/null || true
	done
}
# shellcheck disable=SC2317 # invoked by trap
on_signal() {
	if ((stopping)); then
		log "killing"
		stop_all KILL
	else
		stopping=1
		log "stopping (Ctrl-C again to kill)"
		stop_all TERM
	fi
}
trap on_signal INT TERM
trap 'stop_all KILL' EXIT

set +e
rc=0
while ((${#pids[@]})); do
	pid=""
	wait -n -p pid "${pids[@]}"
	st=$?
	[[ -n ${pid:-} ]] || continue # interrupted by a signal; the trap ran
	rest=()
	for p in "${pids[@]}"; do
		[[ $p == "$pid" ]] || rest+=("$p")
	done
	pids=("${rest[@]}")
	if ((stopping)); then
		# Exit by our SIGTERM counts as a clean stop.
		if ((st != 0 && st != 143)); then
			log "${name[$pid]} exited with status $st"
			((rc)) || rc=$st
		else
			log "${name[$pid]} stopped"
		fi
	else
		log "${name[$pid]} exited with status $st; stopping the rest"
		((rc)) || rc=$st
		stopping=1
		stop_all TERM
	fi
done
trap - EXIT
exit "$rc"
