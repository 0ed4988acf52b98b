#!/usr/bin/env bash
# shellcheck disable=SC2016 # bash -c scripts get their arguments as $0 $1
# Make sure PostgreSQL and Redis answer at the URLs the service and the tests
# use, starting project-local servers (data under .data/) when a loopback URL
# has nothing behind it, and create the databases the URLs name.
#
#   scripts/services.sh [all|run|test]   ensure the services (default: all)
#   scripts/services.sh stop             stop the servers this script started
#
# run:  UUM_DATABASE_URL   (default postgres://127.0.0.1:5432/uum?sslmode=disable)
#       UUM_REDIS_URL      (default redis://127.0.0.1:6379/0)
# test: TEST_DATABASE_URL  (default postgres://127.0.0.1:5432/uum_test?sslmode=disable)
#       TEST_REDIS_URL     (default redis://127.0.0.1:6379/0)
#       TEST_REDIS_SERVER  (default: redis-server on PATH, installed if missing)
#       TEST_CHROMIUM      (default: chromium on PATH, installed if missing)
#       TEST_PROMTOOL      (default: promtool on PATH, installed if missing)
#       UUM_BROWSER_TESTS  (skip: do not install Chromium; the browser tests skip)
#       CI                 (true: a missing install the tests need is an error)
#
# Servers that already answer are used as they are. Missing redis-server or
# PostgreSQL binaries are installed with apt-get (as root, or through sudo).
# test also makes sure the programs the tests run are installed: the
# redis-server binary (the asynq tests start a private redis-server of
# their own); curl, which the README's walkthrough runs; Chromium, which
# the console's browser tests drive; promtool (Debian's prometheus
# package), which checks /metrics and the alert rules; and PostgreSQL's
# server programs, with which the chaos round starts a cluster of its own,
# even when a PostgreSQL answers without them (in Docker, say). Migrations
# are not run here: the binaries and the tests migrate on start.
#
# PostgreSQL: apt-get's package creates a "main" cluster (and starts it where
# systemd runs). When this script can prove apt-get just created it (its
# /etc/postgresql folder did not exist before), it drops it: it is empty,
# its password auth does not fit the URLs, and it would hold port 5432.
# Clusters it cannot prove it created are never touched.

# Written for bash 3.2 up to here, so old shells reach the message.
if [ -z "${BASH_VERSINFO:-}" ] || ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
	echo "services: error: needs bash 5.1 or newer (this is ${BASH_VERSION:-not bash}); on macOS: brew install bash, then run it again from a new terminal" >&2
	exit 1
fi
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$ROOT/.data"

: "${UUM_DATABASE_URL:=postgres://127.0.0.1:5432/uum?sslmode=disable}"
: "${UUM_REDIS_URL:=redis://127.0.0.1:6379/0}"
: "${TEST_DATABASE_URL:=postgres://127.0.0.1:5432/uum_test?sslmode=disable}"
: "${TEST_REDIS_URL:=redis://127.0.0.1:6379/0}"

log() { printf 'services: %s\n' "$*" >&2; }
die() {
	printf 'services: error: %s\n' "$*" >&2
	exit 1
}

ME="$(id -un)"
IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1

# ---------------------------------------------------------------- helpers

# parse_url URL DEFAULT_PORT sets U_SCHEME U_USER U_PASS U_HOST U_PORT U_PATH
# U_QUERY (user, password and path percent-decoded).
parse_url() {
	local url=$1 rest auth userinfo=""
	[[ $url == *://* ]] || return 1
	U_SCHEME=${url%%://*}
	rest=${url#*://}
	rest=${rest%%#*}
	U_QUERY="" U_PATH=""
	if [[ $rest == *\?* ]]; then
		U_QUERY=${rest#*\?}
		rest=${rest%%\?*}
	fi
	auth=${rest%%/*}
	[[ $rest == */* ]] && U_PATH=${rest#*/}
	if [[ $auth == *@* ]]; then
		userinfo=${auth%@*}
		auth=${auth##*@}
	fi
	U_USER=${userinfo%%:*} U_PASS=""
	[[ $userinfo == *:* ]] && U_PASS=${userinfo#*:}
	if [[ $auth == \[* ]]; then # [ipv6]:port
		U_HOST=${auth#\[}
		U_HOST=${U_HOST%%]*}
		U_PORT=${auth##*]}
		U_PORT=${U_PORT#:}
	else
		U_HOST=${auth%%:*} U_PORT=""
		[[ $auth == *:* ]] && U_PORT=${auth##*:}
	fi
	U_HOST=${U_HOST:-127.0.0.1}
	U_PORT=${U_PORT:-$2}
	U_USER=$(urldecode "$U_USER")
	U_PASS=$(urldecode "$U_PASS")
	U_PATH=$(urldecode "$U_PATH")
	[[ $U_PORT =~ ^[0-9]+$ ]]
}

urldecode() {
	local s=${1//\\/\\\\}
	printf '%b' "${s//%/\\x}"
}

# query_param QUERY NAME prints the value of NAME in a URL query string.
query_param() {
	local kv
	local IFS='&'
	for kv in $1; do
		[[ ${kv%%=*} == "$2" ]] && { printf '%s' "${kv#*=}"; return 0; }
	done
	return 0
}

is_loopback() {
	case $1 in
	localhost | 127.* | ::1) return 0 ;;
	esac
	return 1
}

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout 3)

tcp_open() { # host port
	"${TIMEOUT[@]}" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# run_as_pg runs a command as the owner of the project-local PostgreSQL
# cluster: the current user, or "postgres" when we are root (initdb and
# postgres refuse to run as root).
run_as_pg() {
	if ((IS_ROOT)); then
		if command -v runuser >/dev/null; then
			(cd / && runuser -u postgres -- "$@")
		else
			(cd / && su -s /bin/bash -c "$(printf '%q ' "$@")" postgres)
		fi
	else
		"$@"
	fi
}

# or_set VAR: the way around an install that a variable offers, if any.
or_set() { [[ -z $1 ]] || printf ', or set %s to a running server' "$1"; }

# need_root WHAT VAR: make sure we can run commands as root (we are root,
# or sudo works), so a refused sudo is reported as such. VAR, if not
# empty, names the variable that would make the install unneeded.
SUDO=()
need_root() {
	((IS_ROOT)) && return 0
	((${#SUDO[@]})) && return 0
	command -v sudo >/dev/null ||
		die "$1 needs root and $ME is not root (and there is no sudo): run as root, do it yourself$(or_set "$2")"
	log "$1 needs root: asking sudo (as $ME)"
	sudo true 9>&- ||
		die "sudo failed for $ME, so cannot $1: run as root, let $ME use sudo, do it yourself$(or_set "$2")"
	SUDO=(sudo)
}

APT_UPDATED=0
apt_install() { # VAR PACKAGE... (VAR may be "": see need_root)
	local var=$1
	shift
	command -v apt-get >/dev/null ||
		die "$* not installed and apt-get is not available: install it$(or_set "$var")"
	need_root "install $* with apt-get" "$var"
	log "installing $* with apt-get"
	if ((!APT_UPDATED)); then
		"${SUDO[@]}" apt-get update -q >&2 9>&- || die "apt-get update failed (see its output above)"
		APT_UPDATED=1
	fi
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 9>&- ||
		die "apt-get install $* failed (see its output above)"
}

# proc_args PID prints the command line of a process ("" if it is gone).
proc_args() {
	if [[ -r /proc/$1/cmdline ]]; then
		tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null
	else
		ps -o args= -p "$1" 2>/dev/null || true
	fi
}

# proc_cwd_is PID DIR: the process works in DIR. Where there is no /proc
# (macOS) the command line check alone decides.
proc_cwd_is() {
	[[ -d /proc/$1 ]] || return 0
	[[ $(readlink "/proc/$1/cwd" 2>/dev/null) == "$(cd "$2" 2>/dev/null && pwd -P)" ]]
}

# ---------------------------------------------------------------- redis

redis_answers() { # host port: 0 if a Redis server replies to PING
	local reply
	reply=$("${TIMEOUT[@]}" bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "PING\r\n" >&3
		IFS= read -r -t 2 line <&3 && printf "%s" "$line"' "$1" "$2" 2>/dev/null) || return 1
	case $reply in
	+PONG* | -NOAUTH* | -LOADING* | -ERR* | -WRONGPASS* | -DENIED*) return 0 ;;
	esac
	return 1
}

declare -A REDIS_DONE=()

ensure_redis() { # VAR
	local var=$1 url=${!1}
	parse_url "$url" 6379 || die "$var: cannot parse '$url'"
	local host=$U_HOST port=$U_PORT pass=$U_PASS
	case $U_SCHEME in
	redis) ;;
	rediss)
		tcp_open "$host" "$port" && { log "redis ok at $host:$port (TLS, $var)"; return 0; }
		die "$var: nothing answers at $host:$port (TLS URLs are not started locally)"
		;;
	*) die "$var: unsupported scheme '$U_SCHEME' (want redis://)" ;;
	esac
	[[ -n ${REDIS_DONE[$host:$port]:-} ]] && return 0
	REDIS_DONE[$host:$port]=1

	if redis_answers "$host" "$port"; then
		log "redis ok at $host:$port"
		return 0
	fi
	is_loopback "$host" ||
		die "$var: no Redis answers at $host:$port (not a loopback address, so not starting one; start it or fix $var)"
	tcp_open "$host" "$port" &&
		die "$var: something listens on $host:$port but does not answer like Redis"

	if ! command -v redis-server >/dev/null; then
		apt_install "$var" redis-server
		# The package may have started the system redis on this port.
		if redis_answers "$host" "$port"; then
			log "redis ok at $host:$port (system service)"
			return 0
		fi
	fi

	local dir="$DATA/redis" bind=("$host")
	[[ $host == localhost ]] && bind=(127.0.0.1 -::1)
	mkdir -p "$dir"
	local args=(--daemonize yes --bind "${bind[@]}" --port "$port" --dir "$dir"
		--save "" --appendonly no --maxmemory-policy noeviction
		--logfile "$dir/redis-$port.log" --pidfile "$dir/redis-$port.pid")
	[[ -n $pass ]] && args+=(--requirepass "$pass")
	log "starting project-local redis on $host:$port (log: ${dir#"$ROOT"/}/redis-$port.log)"
	redis-server "${args[@]}" >&2 9>&- || die "redis-server failed to start (see $dir/redis-$port.log)"
	local i
	for ((i = 0; i < 50; i++)); do
		if redis_answers "$host" "$port"; then
			log "redis ok at $host:$port"
			return 0
		fi
		sleep 0.2
	done
	tail -n 20 "$dir/redis-$port.log" >&2 2>/dev/null || true
	die "redis did not answer at $host:$port within 10s"
}

# ensure_redis_binary: the asynq tests start a private redis-server of
# their own (internal/testkit/redistest.Server), whatever TEST_REDIS_URL points at,
# and the Redis Cluster tests a cluster of six (scripts/redis-cluster.sh),
# which redis-cli creates: Debian's redis-server brings redis-tools, which
# holds redis-cli.
ensure_redis_binary() {
	local cli=redis-cli
	[[ -n ${TEST_REDIS_SERVER:-} ]] && cli=$(dirname "$TEST_REDIS_SERVER")/redis-cli
	if [[ -n ${TEST_REDIS_SERVER:-} ]] || command -v redis-server >/dev/null; then
		command -v "$cli" >/dev/null || command -v redis-cli >/dev/null && return 0
		command -v apt-get >/dev/null ||
			die "the Redis Cluster tests need redis-cli: install it (Debian: redis-tools; macOS: brew install redis)"
		apt_install TEST_REDIS_SERVER redis-tools
		return 0
	fi
	command -v apt-get >/dev/null ||
		die "the tests start a private redis-server of their own: install redis-server (macOS: brew install redis), or set TEST_REDIS_SERVER to its path"
	apt_install TEST_REDIS_SERVER redis-server redis-tools
}

# ensure_curl: TestQuickStart (internal/testkit/docstest) runs the README's
# walkthrough, whose commands are curl's.
ensure_curl() {
	command -v curl >/dev/null && return 0
	command -v apt-get >/dev/null ||
		die "the README's walkthrough, which the tests run, needs curl: install it (macOS ships it)"
	apt_install "" curl
}

# ensure_chromium: the console's browser tests (cmd/api) drive Debian's
# chromium headless; they look for it on PATH or at TEST_CHROMIUM.
ensure_chromium() {
	[[ -n ${TEST_CHROMIUM:-} ]] && return 0
	command -v chromium >/dev/null && return 0
	if [[ ${UUM_BROWSER_TESTS:-} == skip ]]; then
		log "UUM_BROWSER_TESTS=skip: not installing Chromium; the console's browser tests skip"
		return 0
	fi
	command -v apt-get >/dev/null ||
		die "the console's browser tests drive Chromium: install it (macOS: brew install --cask chromium), or set TEST_CHROMIUM to its path"
	apt_install TEST_CHROMIUM chromium
}

# ensure_promtool: the metrics tests run promtool (check metrics, check
# rules, test rules), from Debian's prometheus package; they look for it on
# PATH or at TEST_PROMTOOL. Where systemd runs, the package also starts a
# Prometheus server on :9090: promtool was missing, so the package, and
# that server, are ours; it is stopped and disabled, as uum needs only
# the tool.
ensure_promtool() {
	[[ -n ${TEST_PROMTOOL:-} ]] && return 0
	command -v promtool >/dev/null && return 0
	command -v apt-get >/dev/null ||
		die "the metrics tests run promtool: install Prometheus (macOS: brew install prometheus), or set TEST_PROMTOOL to its promtool"
	apt_install TEST_PROMTOOL prometheus
	if [[ -d /run/systemd/system ]] && systemctl is-active --quiet prometheus 2>/dev/null; then
		log "stopping the Prometheus server the package started (uum needs only promtool)"
		"${SUDO[@]}" systemctl disable --now prometheus >&2 9>&- || log "could not stop it: systemctl disable --now prometheus"
	fi
}

# ---------------------------------------------------------------- postgres

# pg_state host port: 0 accepting, 1 up but not accepting yet, 2 no answer.
pg_state() {
	if command -v pg_isready >/dev/null; then
		local rc=0
		pg_isready -q -h "$1" -p "$2" -t 3 || rc=$?
		case $rc in
		0) return 0 ;;
		1) return 1 ;;
		*) return 2 ;;
		esac
	fi
	tcp_open "$1" "$2" && return 0
	return 2
}

# pg_wait host port seconds: wait until the server accepts connections.
pg_wait() {
	local i st
	for ((i = 0; i < $3 * 5; i++)); do
		st=0
		pg_state "$1" "$2" || st=$?
		((st == 0)) && return 0
		sleep 0.2
	done
	return 1
}

# find_pg_bin [VERSION]: set PGBIN to a directory holding initdb, pg_ctl and
# psql (Debian keeps them in /usr/lib/postgresql/<version>/bin).
find_pg_bin() {
	local want=${1:-} d p
	PGBIN=""
	if [[ -n $want && -x /usr/lib/postgresql/$want/bin/pg_ctl ]]; then
		PGBIN=/usr/lib/postgresql/$want/bin
		return 0
	fi
	if p=$(command -v pg_ctl) && p=$(readlink -f "$p") && [[ -x ${p%/*}/initdb ]]; then
		PGBIN=${p%/*}
	else
		for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV); do
			[[ -x $d/pg_ctl && -x $d/initdb ]] && { PGBIN=$d; break; }
		done
	fi
	[[ -n $PGBIN ]]
}

find_psql() {
	local d
	PSQL=$(command -v psql || true)
	[[ -n $PSQL ]] && return 0
	[[ -n ${PGBIN:-} && -x $PGBIN/psql ]] && { PSQL=$PGBIN/psql; return 0; }
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV); do
		[[ -x $d/psql ]] && { PSQL=$d/psql; return 0; }
	done
	return 1
}

# Where the project-local cluster for a port lives: normally .data/pg/<port>;
# as root, when the "postgres" user cannot reach the checkout (e.g. under
# /root), <postgres home>/uum-<hash of checkout>/<port>.
pg_alt_base() {
	local home sum
	home=$(getent passwd postgres | cut -d: -f6)
	sum=$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
	printf '%s' "${home:-/var/lib/postgresql}/uum-$sum"
}

# pg_existing_datadir port prints the folder of a cluster an earlier run
# made for that port, if there is one.
pg_existing_datadir() {
	local d
	for d in "$DATA/pg/$1" $(id postgres >/dev/null 2>&1 && printf '%s/%s' "$(pg_alt_base)" "$1"); do
		[[ -f $d/PG_VERSION ]] && { printf '%s' "$d"; return 0; }
	done
	return 0
}

# pg_new_datadir port chooses the folder of a new cluster. Call it only once
# PostgreSQL is installed: the answer depends on the postgres user, which
# the package creates.
pg_new_datadir() {
	local dir="$DATA/pg/$1"
	if ((IS_ROOT)) && ! run_as_pg test -x "$ROOT" 2>/dev/null; then
		dir=$(pg_alt_base)/$1
	fi
	printf '%s' "$dir"
}

# pg_is_ours datadir: a postgres server we started runs on that folder. Its
# postmaster.pid alone is not proof: the pid may have been reused since.
pg_is_ours() {
	local dir=$1 pid args
	[[ -f $dir/postmaster.pid ]] || return 1
	pid=$(head -n 1 "$dir/postmaster.pid" 2>/dev/null)
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	args=$(proc_args "$pid")
	[[ $args == *postgres* && $args == *"-D $dir "* ]] && proc_cwd_is "$pid" "$dir"
}

# pg_cluster_dirs lists Debian's cluster folders (/etc/postgresql/VER/NAME).
pg_cluster_dirs() {
	local d
	for d in /etc/postgresql/*/*/; do
		[[ -f $d/postgresql.conf ]] && printf '%s\n' "${d%/}"
	done
	return 0
}

# pg_drop_new_clusters BEFORE WHY: drop the clusters whose folder is not in
# BEFORE (the list from before our apt-get install), that is the empty
# "main" cluster the package has just created, and that the package may
# have started on 5432 with password auth. Proof that we made it, not an
# earlier install: its folder did not exist when our apt-get started. WHY
# says why the project does not need it.
pg_drop_new_clusters() {
	local before=$1 why=$2 d ver name cport
	while IFS= read -r d; do
		[[ -n $d ]] || continue
		grep -qxF "$d" <<<"$before" && continue
		name=${d##*/} ver=${d%/*} ver=${ver##*/}
		cport=$(sed -n 's/^[[:space:]]*port[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$d/postgresql.conf" | head -n 1)
		log "removing the empty cluster $ver/$name (port ${cport:-?}) that apt-get just created: $why (to get it back: pg_createcluster $ver $name --start)"
		"${SUDO[@]}" pg_dropcluster --stop "$ver" "$name" >&2 9>&- ||
			die "pg_dropcluster $ver $name failed"
	done < <(pg_cluster_dirs)
}

# pg_url_user: the role the parsed URL connects as (URL user, PGUSER, OS user).
pg_url_user() { printf '%s' "${U_USER:-${PGUSER:-$ME}}"; }

# pg_ensure_role host port role: on our own (trust-auth) cluster, create a
# superuser role for the user the URLs connect as.
pg_ensure_role() {
	local host=$1 port=$2 role=$3 have
	[[ $role == postgres ]] && return 0
	have=$(PGCONNECT_TIMEOUT=5 "$PGBIN/psql" -X -Atq -h "$host" -p "$port" -U postgres -d postgres \
		-c "SELECT 1 FROM pg_roles WHERE rolname = '${role//\'/\'\'}'") ||
		die "cannot connect to the project-local PostgreSQL at $host:$port as postgres"
	[[ $have == 1 ]] && return 0
	log "creating postgres role $role"
	PGCONNECT_TIMEOUT=5 "$PGBIN/psql" -X -q -h "$host" -p "$port" -U postgres -d postgres \
		-c "CREATE ROLE \"${role//\"/\"\"}\" SUPERUSER LOGIN" >&2 ||
		die "cannot create role $role"
}

# pg_install_server VAR WHY [VERSION]: install Debian's PostgreSQL server
# package and drop the cluster it makes (pg_drop_new_clusters: WHY).
pg_install_server() {
	local before
	before=$(pg_cluster_dirs)
	apt_install "$1" postgresql
	find_pg_bin "${3:-}" || die "PostgreSQL server binaries (initdb, pg_ctl) not found after installing"
	pg_drop_new_clusters "$before" "$2"
}

pg_start_local() { # VAR host port
	local var=$1 host=$2 port=$3 datadir ver=""
	datadir=$(pg_existing_datadir "$port")
	[[ -n $datadir ]] && ver=$(<"$datadir/PG_VERSION")

	find_pg_bin "$ver" || pg_install_server "$var" "the project runs its own on port $port" "$ver"
	# Only now: the package has created the postgres user.
	[[ -n $datadir ]] || datadir=$(pg_new_datadir "$port")
	local have=""
	[[ $("$PGBIN/pg_ctl" --version) =~ ([0-9]+) ]] && have=${BASH_REMATCH[1]}
	[[ -z $ver || $ver == "$have" ]] ||
		die "$datadir was created by PostgreSQL $ver but $PGBIN is version $have; remove it or install PostgreSQL $ver"

	if ((IS_ROOT)); then
		id postgres >/dev/null 2>&1 ||
			die "running as root but there is no 'postgres' user to own the project-local cluster"
		mkdir -p "${datadir%/*}"
		[[ $datadir == "$DATA"/* ]] && chmod a+x "$DATA" "$DATA/pg"
		[[ -d $datadir ]] || install -d -m 700 -o postgres -g "$(id -gn postgres)" "$datadir"
	else
		mkdir -p "$datadir"
		chmod 700 "$datadir"
	fi
	[[ $datadir == "$DATA"/* ]] || log "using $datadir for the cluster (the postgres user cannot reach $ROOT)"

	if [[ ! -f $datadir/PG_VERSION ]]; then
		log "initialising project-local postgres cluster in ${datadir#"$ROOT"/}"
		if ! run_as_pg "$PGBIN/initdb" -D "$datadir" -U postgres --auth=trust -E UTF8 --no-locale \
			>"$DATA/initdb-$port.log" 2>&1; then
			tail -n 20 "$DATA/initdb-$port.log" >&2
			die "initdb failed (see $DATA/initdb-$port.log)"
		fi
	fi

	# Unix sockets go in the data dir unless the path is too long for one.
	local sock=$datadir
	((${#sock} + 16 > 107)) && sock=""
	local listen=$host
	log "starting project-local postgres on $host:$port (log: ${datadir#"$ROOT"/}/server.log)"
	if ! run_as_pg "$PGBIN/pg_ctl" -D "$datadir" -l "$datadir/server.log" -w -t 60 \
		-o "-c listen_addresses='$listen' -p $port -k '$sock' -c max_connections=300" start >/dev/null 9>&-; then
		tail -n 20 "$datadir/server.log" >&2 2>/dev/null || true
		die "postgres failed to start on $host:$port (see $datadir/server.log)"
	fi
	pg_wait "$host" "$port" 30 || die "postgres did not accept connections at $host:$port within 30s"
	PG_OURS[$host:$port]=1
	log "postgres ok at $host:$port"
}

declare -A PG_DONE=() PG_OURS=()

ensure_postgres() { # VAR
	local var=$1 url=${!1}
	parse_url "$url" 5432 || die "$var: cannot parse '$url' (want postgres://[user[:password]@]host[:port]/db)"
	case $U_SCHEME in
	postgres | postgresql) ;;
	*) die "$var: unsupported scheme '$U_SCHEME' (want postgres://)" ;;
	esac
	local qhost
	qhost=$(query_param "$U_QUERY" host) # postgres:///db?host=/run/postgresql
	[[ -n $qhost ]] && U_HOST=$(urldecode "$qhost")
	local host=$U_HOST port=$U_PORT role st=0
	role=$(pg_url_user)
	if [[ -z ${PG_DONE[$host:$port]:-} ]]; then
		PG_DONE[$host:$port]=1
		pg_state "$host" "$port" || st=$?
		if ((st == 1)); then
			log "postgres at $host:$port is starting; waiting"
			pg_wait "$host" "$port" 30 || die "$var: postgres at $host:$port does not accept connections"
			st=0
		fi
		if ((st == 0)); then
			log "postgres ok at $host:$port"
			# Is it our own cluster, from an earlier run?
			local datadir
			datadir=$(pg_existing_datadir "$port")
			if [[ -n $datadir ]] && pg_is_ours "$datadir" && find_pg_bin "$(<"$datadir/PG_VERSION")"; then
				PG_OURS[$host:$port]=1
			fi
		else
			is_loopback "$host" ||
				die "$var: no PostgreSQL answers at $host:$port (not a loopback TCP address, so not starting one; start it or fix $var)"
			pg_start_local "$var" "$host" "$port"
		fi
	fi
	# Our own cluster trusts everyone but needs a role for the URL's user.
	[[ -n ${PG_OURS[$host:$port]:-} ]] && pg_ensure_role "$host" "$port" "$role"
	ensure_database "$var"
}

# ensure_pg_server_programs: the chaos round of the tests (cmd/chaos
# TestShortRun) starts a PostgreSQL cluster of its own, whatever
# TEST_DATABASE_URL points at, so it needs the server programs (initdb,
# postgres) even where a PostgreSQL answers without them (in Docker, on
# another host). They are a package, not a server: nothing is started.
ensure_pg_server_programs() {
	find_pg_bin && return 0
	local why="the chaos round (cmd/chaos TestShortRun) starts a PostgreSQL cluster of its own and needs the server programs initdb and postgres"
	if ! command -v apt-get >/dev/null; then
		[[ ${CI:-} == true ]] && die "$why: install them (macOS: brew install postgresql)"
		log "warning: $why, which are not installed: the round skips until you install them (macOS: brew install postgresql)"
		return 0
	fi
	log "$why, which are not installed"
	pg_install_server "" "uum needs only the server programs"
}

ensure_database() { # VAR (U_* still set from ensure_postgres)
	local var=$1 db=$U_PATH role sslmode out maint
	role=$(pg_url_user)
	[[ -n $db ]] || db=$role # libpq/pgx default database name
	if ! find_psql; then
		apt_install "$var" postgresql-client
		find_psql || die "psql not found after installing postgresql-client"
	fi
	sslmode=$(query_param "$U_QUERY" sslmode)
	local env=(PGHOST="$U_HOST" PGPORT="$U_PORT" PGUSER="$role" PGCONNECT_TIMEOUT=5)
	[[ -n $U_PASS ]] && env+=(PGPASSWORD="$U_PASS")
	[[ -n $sslmode ]] && env+=(PGSSLMODE="$sslmode")
	local lit="'${db//\'/\'\'}'" ident="\"${db//\"/\"\"}\""
	for maint in postgres template1; do
		if out=$(env "${env[@]}" "$PSQL" -X -Atq -d "$maint" \
			-c "SELECT 1 FROM pg_database WHERE datname = $lit" 2>&1); then
			break
		fi
	done
	[[ $out == 1 || -z $out ]] ||
		die "$var: cannot connect to PostgreSQL at $U_HOST:$U_PORT as $role: $out"
	if [[ $out == 1 ]]; then
		log "postgres database $db exists"
		return 0
	fi
	if out=$(env "${env[@]}" "$PSQL" -X -q -d "$maint" -c "CREATE DATABASE $ident" 2>&1); then
		log "created postgres database $db"
	elif [[ $out == *"already exists"* ]]; then
		log "postgres database $db exists"
	else
		die "$var: cannot create database $db: $out"
	fi
}

# ---------------------------------------------------------------- stop

# redis_is_ours PID PORT DIR: the pid is the redis-server this script
# started on PORT (its title names the port, it works in DIR), not a
# process that reuses the pid of a stale pidfile.
redis_is_ours() {
	local args re="^([^ ]*/)?redis-server [^ ]*:$2( |\$)"
	args=$(proc_args "$1")
	[[ $args =~ $re ]] && proc_cwd_is "$1" "$3"
}

stop_local() {
	local f port d datadir pid i stopped=0
	shopt -s nullglob
	for f in "$DATA"/redis/redis-*.pid; do
		port=${f##*/redis-}
		port=${port%.pid}
		pid=$(<"$f")
		if [[ $pid =~ ^[0-9]+$ ]] && redis_is_ours "$pid" "$port" "$DATA/redis"; then
			log "stopping project-local redis on port $port (pid $pid)"
			kill "$pid" 2>/dev/null || true # SIGTERM: redis shuts down (nothing to save)
			for ((i = 0; i < 50; i++)); do
				[[ -n $(proc_args "$pid") ]] || break
				sleep 0.2
			done
			[[ -z $(proc_args "$pid") ]] || die "redis (pid $pid) did not stop within 10s"
			log "stopped project-local redis on port $port"
			stopped=$((stopped + 1))
		else
			log "removing the stale ${f#"$ROOT"/}: pid $pid is not our redis-server on port $port"
		fi
		rm -f "$f" 2>/dev/null || true
	done
	local dirs=("$DATA"/pg/*/)
	if id postgres >/dev/null 2>&1; then
		dirs+=("$(pg_alt_base)"/*/)
	fi
	for d in "${dirs[@]}"; do
		datadir=${d%/}
		[[ -f $datadir/postmaster.pid ]] || continue
		if ! pg_is_ours "$datadir"; then
			log "$datadir/postmaster.pid names pid $(head -n 1 "$datadir/postmaster.pid"), which is not its postgres: nothing to stop there"
			continue
		fi
		find_pg_bin "$(cat "$datadir/PG_VERSION" 2>/dev/null)" ||
			die "no pg_ctl for the PostgreSQL version of $datadir"
		log "stopping project-local postgres in $datadir"
		run_as_pg "$PGBIN/pg_ctl" -D "$datadir" -m fast -w stop >/dev/null ||
			die "pg_ctl stop failed for $datadir"
		log "stopped project-local postgres in $datadir"
		stopped=$((stopped + 1))
	done
	((stopped)) || log "nothing to stop: no project-local PostgreSQL or Redis is running"
}

# ---------------------------------------------------------------- main

mode=${1:-all}
mkdir -p "$DATA"
if command -v flock >/dev/null; then
	# Servers and apt-get are started with 9>&- so they do not keep the lock.
	exec 9>"$DATA/.services.lock"
	flock -w 600 9 || die "another scripts/services.sh has held $DATA/.services.lock for 10 minutes"
fi

case $mode in
all)
	ensure_redis UUM_REDIS_URL
	ensure_redis TEST_REDIS_URL
	ensure_redis_binary
	ensure_curl
	ensure_chromium
	ensure_promtool
	ensure_postgres UUM_DATABASE_URL
	ensure_postgres TEST_DATABASE_URL
	ensure_pg_server_programs
	;;
run)
	ensure_redis UUM_REDIS_URL
	ensure_postgres UUM_DATABASE_URL
	;;
test)
	ensure_redis TEST_REDIS_URL
	ensure_redis_binary
	ensure_curl
	ensure_chromium
	ensure_promtool
	ensure_postgres TEST_DATABASE_URL
	ensure_pg_server_programs
	;;
stop) stop_local ;;
*)
	echo "usage: $0 [all|run|test|stop]" >&2
	exit 2
	;;
esac
