#!/usr/bin/env bash
# Prove the README's two commands work on a fresh Debian machine, on the
# first try: debootstrap a Debian bookworm root under .data/fresh-debian/,
# put a clean copy of the repository's HEAD in it, install only what the
# README lists as prerequisites (Go, copied from this machine's GOROOT; make;
# gcc; ca-certificates; curl), then inside a chroot run `make run` and `make test`
# with every UUM_*/TEST_* URL on a free port, so scripts/services.sh must
# install PostgreSQL and Redis with apt-get and start its own servers.
#
#   sudo scripts/fresh-debian-check.sh [ci|root|user|all]   (default: all)
#
# ci:   as CI runs it: as root, a git clone in /root/uum on a bare root (Go,
#       git and ca-certificates only: no make, gcc or curl), `CI=true bash
#       .ci/run </dev/null`, with TEST_DATABASE_URL at a PostgreSQL that
#       answers but runs from another root (as one in Docker or on another
#       host would), so the checked root has none of its server programs and
#       scripts/services.sh must install them for the chaos round; then
#       .ci/run again: the first and the second run's times.
# root: as root, a git clone in /root/uum (the case the postgres user cannot
#       enter): make run (healthz, POST an event, .bin/processor -once, the
#       count), then make test with sentinel keys seeded in all 16 databases
#       of that Redis and a row in the service's own database, checked after;
#       then `scripts/services.sh stop`, twice.
# user: as a non-root user with sudo, a `git archive` tarball in its home:
#       first a user without sudo rights (must fail saying sudo failed), then
#       make test first, then make run as above.
#
# Not part of `make test`: it needs root, debootstrap and Debian's mirrors,
# and takes 15-40 minutes a mode. The pristine debootstrap output is cached
# in .data/fresh-debian/base, and base plus the prerequisites (nothing of
# uum, no PostgreSQL, no Redis) in prereq-<mode>, and ci's PostgreSQL root
# in pg-elsewhere; FRESH_REBOOTSTRAP=1 makes them again. Every run copies
# prereq-<mode> to a new root-<mode>.
# Logs: .data/fresh-debian/<mode>.log.
#
# The chroot shares this machine's network, so apt's own service start
# would collide with servers on this host's default ports; the check
# installs a policy-rc.d that forbids it (as Debian's container images do).
# On a machine with systemd, apt does start the default cluster;
# scripts/services.sh removes it when it can prove apt-get just made it.
#
# Environment: FRESH_GOCACHE=1 keeps Go's caches between runs (see gocache),
# FRESH_MIRROR (default http://deb.debian.org/debian),
# FRESH_REF (default HEAD), GOROOT_SRC (default: `go env GOROOT`),
# FRESH_DIR (default .data/fresh-debian; another folder lets two modes run
# at once).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK=${FRESH_DIR:-"$ROOT/.data/fresh-debian"}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
REF=${FRESH_REF:-HEAD}
SUITE=bookworm

say() { printf '\nfresh: %s\n' "$*" >&2; }
die() {
	printf 'fresh: FAIL: %s\n' "$*" >&2
	exit 1
}

((BASH_VERSINFO[0] >= 5)) || die "needs bash 5 or newer"
[[ $(id -u) == 0 ]] || die "run as root (debootstrap, chroot and mounts need it)"
for c in debootstrap chroot git curl mount; do
	command -v "$c" >/dev/null || die "$c not found (apt-get install debootstrap curl git)"
done
GOROOT_SRC=${GOROOT_SRC:-$(go env GOROOT 2>/dev/null || true)}
[[ -x $GOROOT_SRC/bin/go ]] || die "no Go at '$GOROOT_SRC' (set GOROOT_SRC)"
COMMIT=$(git -C "$ROOT" rev-parse --verify "$REF^{commit}") || die "no commit $REF"
[[ -z $(git -C "$ROOT" status --porcelain --untracked-files=no) ]] ||
	say "note: uncommitted changes are not checked; the check uses $REF ($COMMIT)"

MOUNTED=()
cleanup() {
	local i
	for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
		umount -R -l "${MOUNTED[i]}" 2>/dev/null || true
	done
	MOUNTED=()
	# Servers started in the chroots outlive them: stop what is left.
	local p r
	for r in ${CHROOT:+"$CHROOT"} ${PGROOT:+"$PGROOT"}; do
		for p in /proc/[0-9]*; do
			[[ $(readlink "$p/root" 2>/dev/null) == "$r" ]] && kill -9 "${p#/proc/}" 2>/dev/null
		done
	done
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount_into() { # ROOT
	local r=$1
	mount -t proc proc "$r/proc" && MOUNTED+=("$r/proc")
	mount -t sysfs sysfs "$r/sys" && MOUNTED+=("$r/sys")
	mount --rbind /dev "$r/dev" && mount --make-rslave "$r/dev" && MOUNTED+=("$r/dev")
	mount -t tmpfs tmpfs "$r/tmp" && MOUNTED+=("$r/tmp")
}

base() {
	if [[ -n ${FRESH_REBOOTSTRAP:-} ]]; then
		rm -rf --one-file-system "$WORK/base" "$WORK"/prereq-*
	fi
	[[ -d $WORK/base ]] && return 0
	say "debootstrap $SUITE from $MIRROR into ${WORK#"$ROOT"/}/base"
	rm -rf "$WORK/base.tmp"
	mkdir -p "$WORK"
	debootstrap --variant=minbase "$SUITE" "$WORK/base.tmp" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
		die "debootstrap failed (see $WORK/debootstrap.log)"
	mv "$WORK/base.tmp" "$WORK/base"
}

# free_ports N: print N TCP ports nothing on loopback listens on.
free_ports() {
	local n=$1 p tries=0 got=()
	while ((${#got[@]} < n)); do
		((tries++ < 1000)) || die "no free ports"
		p=$((20000 + RANDOM % 20000))
		[[ " ${got[*]} " == *" $p "* ]] && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
		got+=("$p")
	done
	echo "${got[@]}"
}

# in_chroot USER SCRIPT: run a bash script in the chroot as USER, in a
# clean environment holding only the check's variables.
in_chroot() {
	local user=$1 home=/root
	shift
	[[ $user == root ]] || home=/home/$user
	chroot --userspec="$user:$user" "$CHROOT" /usr/bin/env -i \
		HOME="$home" USER="$user" LOGNAME="$user" LANG=C.UTF-8 TERM=dumb \
		PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		UUM_DATABASE_URL="$UUM_DATABASE_URL" UUM_REDIS_URL="$UUM_REDIS_URL" \
		TEST_DATABASE_URL="$TEST_DATABASE_URL" TEST_REDIS_URL="$TEST_REDIS_URL" \
		UUM_API_ADDR="$UUM_API_ADDR" "${GOCACHE_ENV[@]}" \
		bash -euo pipefail -c "cd ~ && $*"
}

# new_root DIR: a copy of the pristine base in DIR, mounted, with Debian's
# mirrors and no service starts on install.
new_root() {
	local r=$1
	rm -rf --one-file-system "$r"
	say "[$MODE] copying the pristine base to ${r#"$ROOT"/}"
	cp -a "$WORK/base" "$r"
	mount_into "$r"
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 755 "$r/usr/sbin/policy-rc.d"
	cat >"$r/etc/apt/sources.list" <<-EOF
		deb $MIRROR $SUITE main
		deb $MIRROR $SUITE-updates main
		deb ${MIRROR%/debian}/debian-security $SUITE-security main
	EOF
}

# apt_in ROOT LOG PACKAGE...: install packages in ROOT.
apt_in() {
	local r=$1 log=$2
	shift 2
	chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		bash -c "apt-get update -q && apt-get install -y -q $* && apt-get clean" >"$log" 2>&1 ||
		die "[$MODE] installing $* failed (see $log)"
}

# prereqs MODE: the pristine base plus the README's prerequisites, made
# once and cached in PREREQ (installing them takes minutes on a busy
# machine); it holds no trace of uum. ci's are those of a bare CI
# machine: no make, gcc or curl, which .ci/run must install.
prereqs() {
	local mode=$1 r pkgs="make gcc ca-certificates curl"
	PREREQ="$WORK/prereq-$mode"
	[[ -d $PREREQ ]] && return 0
	r="$PREREQ.tmp"
	new_root "$r"
	[[ $mode == root ]] && pkgs+=" git" # a clone's owner has git (go build stamps VCS info)
	[[ $mode == user ]] && pkgs+=" sudo"
	[[ $mode == ci ]] && pkgs="ca-certificates git" # CI clones with git
	say "[$mode] installing the prerequisites: Go (copied from $GOROOT_SRC), $pkgs"
	cp -a "$GOROOT_SRC" "$r/usr/local/go"
	apt_in "$r" "$WORK/$mode-prereq.log" "$pkgs"
	cleanup
	mv "$r" "$PREREQ"
}

# extra_cas: trust in the chroot the certificate authorities this machine
# adds to Debian's (a TLS-intercepting egress proxy's CA, say), as an admin
# of such a network does on every machine; without them Go cannot download
# modules here. FRESH_EXTRA_CA lists PEM files; by default the CAs in
# /usr/local/share/ca-certificates and the regular (not linked) PEM files in
# /etc/ssl/certs other than the snakeoil one.
extra_cas() {
	local f cas=()
	if [[ -n ${FRESH_EXTRA_CA:-} ]]; then
		read -r -a cas <<<"$FRESH_EXTRA_CA"
	else
		for f in /usr/local/share/ca-certificates/*.crt /etc/ssl/certs/*.pem; do
			[[ -f $f && ! -L $f && $f != */ssl-cert-snakeoil.pem ]] && cas+=("$f")
		done
	fi
	((${#cas[@]})) || return 0
	mkdir -p "$CHROOT/usr/local/share/ca-certificates/fresh-check"
	for f in "${cas[@]}"; do
		f=$(readlink -f "$f")
		cp "$f" "$CHROOT/usr/local/share/ca-certificates/fresh-check/$(basename "${f%.*}").crt"
	done
	chroot "$CHROOT" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the chroot"
	say "[$MODE] trusting this machine's extra CAs too: ${cas[*]}"
}

# gocache MODE: with FRESH_GOCACHE=1, Go's module and build caches live in
# $WORK/gocache-MODE and are kept between runs (the first run is cold): they
# only save download and compile time, and hold nothing of the services.
GOCACHE_ENV=()
gocache() {
	GOCACHE_ENV=()
	[[ -n ${FRESH_GOCACHE:-} ]] || return 0
	local dir="$WORK/gocache-$1" owner=root
	[[ $1 == user ]] && owner=dev
	mkdir -p "$dir/mod" "$dir/build" "$CHROOT/var/cache/fresh-go"
	mount --bind "$dir" "$CHROOT/var/cache/fresh-go" && MOUNTED+=("$CHROOT/var/cache/fresh-go")
	[[ $owner == root ]] || chown -R 1000:1000 "$dir" # dev is the first user, uid 1000
	GOCACHE_ENV=(GOMODCACHE=/var/cache/fresh-go/mod GOCACHE=/var/cache/fresh-go/build)
	say "[$1] Go caches kept in ${dir#"$ROOT"/} (FRESH_GOCACHE)"
}

# prepare MODE: a fresh root with the prerequisites and a checkout.
prepare() {
	local mode=$1
	CHROOT="$WORK/root-$mode"
	if [[ -d $CHROOT ]]; then
		umount -R -l "$CHROOT"/{proc,sys,dev,tmp} 2>/dev/null || true
		rm -rf --one-file-system "$CHROOT"
	fi
	prereqs "$mode"
	say "[$mode] copying ${PREREQ#"$ROOT"/} to ${CHROOT#"$ROOT"/}"
	cp -a "$PREREQ" "$CHROOT"
	mount_into "$CHROOT"
	gocache "$mode"
	# As a Debian install writes it; sudo warns without it.
	printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$CHROOT/etc/hosts"
	extra_cas
	if [[ $mode == user ]]; then
		chroot "$CHROOT" useradd -m -s /bin/bash dev
		chroot "$CHROOT" useradd -m -s /bin/bash nosudo
		echo 'dev ALL=(ALL) NOPASSWD:ALL' >"$CHROOT/etc/sudoers.d/dev"
		chmod 440 "$CHROOT/etc/sudoers.d/dev"
		for u in dev nosudo; do
			mkdir "$CHROOT/home/$u/uum"
			git -C "$ROOT" archive --format=tar "$COMMIT" | tar -x -C "$CHROOT/home/$u/uum"
			chroot "$CHROOT" chown -R "$u:$u" "/home/$u/uum"
		done
	else
		# A ref pins the commit, so the clone has it even if a rebase has
		# since left it off every branch.
		local pin="refs/fresh-check/$$"
		git -C "$ROOT" update-ref "$pin" "$COMMIT"
		local ok=0
		if git clone -q --no-local "$ROOT" "$CHROOT/root/uum" &&
			git -C "$CHROOT/root/uum" fetch -q origin "$pin" &&
			git -C "$CHROOT/root/uum" checkout -q "$COMMIT"; then
			ok=1
		fi
		git -C "$ROOT" update-ref -d "$pin"
		((ok)) || die "[$mode] git clone of $COMMIT failed"
	fi
	# Nothing but the prerequisites: no Postgres, no Redis (and for ci,
	# none of what .ci/run must install).
	local absent=(psql pg_ctl redis-server redis-cli)
	[[ $mode == ci ]] && absent+=(make gcc curl)
	for b in "${absent[@]}"; do
		if chroot "$CHROOT" bash -c "command -v $b || ls /usr/lib/postgresql/*/bin/$b" >/dev/null 2>&1; then
			die "[$mode] $b is already in the fresh root"
		fi
	done
}

set_urls() {
	local ports
	read -r -a ports <<<"$(free_ports 3)"
	PG_PORT=${ports[0]} REDIS_PORT=${ports[1]} API_PORT=${ports[2]}
	# As with the defaults, the service and the tests share one server each.
	UUM_DATABASE_URL="postgres://127.0.0.1:$PG_PORT/uum?sslmode=disable"
	TEST_DATABASE_URL="postgres://127.0.0.1:$PG_PORT/uum_test?sslmode=disable"
	UUM_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
	TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
	UUM_API_ADDR="127.0.0.1:$API_PORT"
	say "free ports: postgres $PG_PORT, redis $REDIS_PORT, api $API_PORT"
}

step() { # LABEL USER COMMAND: run, log, and report the time taken
	local label=$1 user=$2 start=$SECONDS
	shift 2
	say "[$MODE] $label: $*"
	if ! in_chroot "$user" "$*" >>"$LOG" 2>&1; then
		tail -n 40 "$LOG" >&2
		die "[$MODE] $label failed (log: $LOG)"
	fi
	say "[$MODE] $label: ok in $((SECONDS - start))s"
}

# check_run USER DIR: make run in the background, then the README's flow.
check_run() {
	local user=$1 dir=$2 start=$SECONDS api="http://$UUM_API_ADDR"
	say "[$MODE] make run (in the background)"
	in_chroot "$user" "cd $dir && exec make run" >>"$LOG" 2>&1 &
	local run_pid=$!
	local i ok=0
	for ((i = 0; i < 2400; i++)); do # building took 16 minutes on a busy 2-core machine
		if curl -fsS "$api/healthz" >/dev/null 2>&1; then
			ok=1
			break
		fi
		kill -0 "$run_pid" 2>/dev/null || break
		sleep 1
	done
	((ok)) || {
		tail -n 40 "$LOG" >&2
		die "[$MODE] make run: $api/healthz never answered"
	}
	say "[$MODE] make run: healthz ok after $((SECONDS - start))s"
	local T='Authorization: Bearer dev-admin-token-change-me' out
	out=$(curl -s -w '%{http_code}\n' -X POST "$api/v1/events" -H "$T" -H 'Content-Type: application/json' \
		-d '{"user_id":"5f0c6a8e-3b1d-4c2a-9e7f-1a2b3c4d5e6f","event_names":["page_viewed"]}')
	printf '%s\n' "$out" | tee -a "$LOG" >&2
	[[ $(tail -n 1 <<<"$out") == 202 ]] || die "[$MODE] POST /v1/events: want 202"
	# As the README's walkthrough: make run uses counters.example.yaml, and
	# every drainer must name the same counters file.
	out=$(in_chroot "$user" "cd $dir && UUM_COUNTERS_FILE=counters.example.yaml .bin/processor -once" 2>>"$LOG") || die "[$MODE] processor -once failed: $out"
	printf '%s\n' "$out" | tee -a "$LOG" >&2
	out=$(curl -s -w '%{http_code}\n' -H "$T" "$api/v1/unique-counts")
	printf '%s\n' "$out" | tee -a "$LOG" >&2
	[[ $out == *'"event_name":"page_viewed","unique_users":1'* ]] ||
		die "[$MODE] unique-counts: want page_viewed 1"
	# The backlog command of docs/operations.md, as written there.
	local cmd
	# shellcheck disable=SC2016 # the README's text, not an expansion
	cmd=$(grep -m1 '^redis-cli -u "${UUM_REDIS_URL:-redis://127.0.0.1:6379/0}" LLEN ' "$CHROOT$dir/docs/operations.md") ||
		die "[$MODE] no backlog command in docs/operations.md"
	out=$(in_chroot "$user" "$cmd" 2>&1) || die "[$MODE] the backlog command of docs/operations.md failed: $out"
	printf '%s\n%s\n' "$cmd" "$out" | tee -a "$LOG" >&2
	[[ $out == 0 ]] || die "[$MODE] backlog after -once: want 0, got $out"
	# Stop it as a service manager would: SIGTERM to scripts/run.sh (make
	# runs it as its child), which stops both binaries and exits 0.
	local p runsh=""
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/root" 2>/dev/null) == "$CHROOT" ]] || continue
		[[ $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) == *scripts/run.sh* ]] && runsh=${p#/proc/}
	done
	[[ -n $runsh ]] || die "[$MODE] no scripts/run.sh process in the chroot"
	kill -TERM "$runsh"
	local st=0
	wait "$run_pid" || st=$?
	((st == 0)) || die "[$MODE] make run exited with status $st after SIGTERM to scripts/run.sh"
	if ! grep -q '^run: processor stopped' "$LOG" || ! grep -q '^run: api stopped' "$LOG"; then
		die "[$MODE] scripts/run.sh did not report both binaries stopped"
	fi
	say "[$MODE] make run: README flow ok, stopped cleanly"
}

# seed_sentinels / check_sentinels: data of "the developer's own" in every
# database of the Redis that make test uses, and a row in the service's
# Postgres database.
redis_cli() { in_chroot root "redis-cli -p $REDIS_PORT $*"; }
seed_sentinels() {
	local db
	for db in $(seq 0 15); do
		redis_cli -n "$db" SET fresh:sentinel "keep-$db" >/dev/null
	done
	say "[$MODE] seeded fresh:sentinel in Redis databases 0-15 (redis-cli -p $REDIS_PORT)"
}
check_sentinels() {
	local db got lost=0
	for db in $(seq 0 15); do
		got=$(redis_cli -n "$db" GET fresh:sentinel)
		[[ $got == "keep-$db" ]] || {
			say "[$MODE] Redis database $db lost fresh:sentinel (got '$got')"
			lost=1
		}
	done
	((!lost)) || die "[$MODE] make test deleted data it did not create"
	got=$(in_chroot root "psql -X -Atq -h 127.0.0.1 -p $PG_PORT -U postgres -d uum -c 'SELECT count(*) FROM unique_user_events'") ||
		die "[$MODE] cannot read the service database after make test"
	[[ $got == 1 ]] || die "[$MODE] the service database holds $got counted pairs after make test, want 1"
	say "[$MODE] after make test: all 16 sentinels kept, the service database still holds its 1 pair"
}

stop_twice() { # USER DIR
	local out
	out=$(in_chroot "$1" "cd $2 && scripts/services.sh stop" 2>&1) || die "[$MODE] services.sh stop failed: $out"
	printf '%s\n' "$out" | tee -a "$LOG" >&2
	[[ $out == *stopped* ]] || die "[$MODE] services.sh stop did not say what it stopped"
	out=$(in_chroot "$1" "cd $2 && scripts/services.sh stop" 2>&1) || die "[$MODE] second services.sh stop failed: $out"
	printf '%s\n' "$out" | tee -a "$LOG" >&2
	[[ $out == *"nothing to stop"* ]] || die "[$MODE] a second services.sh stop did not say there was nothing to stop"
}

# pg_elsewhere_root: the base plus Debian's postgresql, made once and
# cached in pg-elsewhere. Call it before prepare: its cleanup unmounts all.
pg_elsewhere_root() {
	PGROOT="$WORK/pg-elsewhere"
	[[ -d $PGROOT ]] && return 0
	new_root "$PGROOT.tmp"
	apt_in "$PGROOT.tmp" "$WORK/pg-elsewhere.log" postgresql
	cleanup
	mv "$PGROOT.tmp" "$PGROOT"
}

# pg_elsewhere: a PostgreSQL on PG_PORT, running from pg-elsewhere, so the
# checked root sees one answer with none of its programs. The cluster is
# in that root's /tmp, a new tmpfs each run.
pg_elsewhere() {
	mount_into "$PGROOT"
	local bin
	bin=$(chroot "$PGROOT" bash -c 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1')
	chroot "$PGROOT" runuser -u postgres -- "$bin/initdb" -D /tmp/pg -U postgres --auth=trust >>"$LOG" 2>&1 ||
		die "[$MODE] initdb in ${PGROOT#"$ROOT"/} failed (log: $LOG)"
	chroot "$PGROOT" runuser -u postgres -- "$bin/pg_ctl" -D /tmp/pg -l /tmp/pg/server.log -w \
		-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k /tmp" start >>"$LOG" 2>&1 ||
		die "[$MODE] PostgreSQL in ${PGROOT#"$ROOT"/} did not start (log: $LOG)"
	say "[$MODE] PostgreSQL from ${PGROOT#"$ROOT"/} answers on $PG_PORT"
}

check_ci() {
	MODE=ci LOG="$WORK/ci.log"
	: >"$LOG"
	pg_elsewhere_root
	prepare ci
	set_urls
	pg_elsewhere
	TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/uum_test?sslmode=disable"
	step ".ci/run (first run)" root "cd /root/uum && CI=true bash .ci/run </dev/null"
	local b
	for b in make gcc curl redis-server chromium promtool; do
		in_chroot root "command -v $b" >/dev/null || die "[$MODE] .ci/run passed without $b?"
	done
	in_chroot root "ls /usr/lib/postgresql/*/bin/initdb" >/dev/null ||
		die "[$MODE] .ci/run passed without PostgreSQL's server programs: the chaos round cannot have run"
	[[ -z $(pg_cluster_dirs_in "$CHROOT") ]] || die "[$MODE] apt-get's cluster was left in the root: $(pg_cluster_dirs_in "$CHROOT")"
	say "[$MODE] .ci/run installed make, gcc, curl, redis-server, chromium, promtool and PostgreSQL's server programs (no cluster)"
	step ".ci/run (second run)" root "cd /root/uum && CI=true bash .ci/run </dev/null"
	cleanup
}

pg_cluster_dirs_in() { # ROOT
	local d
	for d in "$1"/etc/postgresql/*/*/; do
		[[ -f $d/postgresql.conf ]] && printf '%s\n' "${d#"$1"}"
	done
	return 0
}

check_root() {
	MODE=root LOG="$WORK/root.log"
	: >"$LOG"
	prepare root
	set_urls
	check_run root /root/uum
	seed_sentinels
	step "make test" root "cd /root/uum && make test"
	check_sentinels
	stop_twice root /root/uum
	cleanup
}

check_user() {
	MODE=user LOG="$WORK/user.log"
	: >"$LOG"
	prepare user
	set_urls
	local out
	say "[$MODE] a user without sudo rights: make test must fail saying so"
	if out=$(in_chroot nosudo "cd ~/uum && make test </dev/null" 2>&1); then
		die "[$MODE] make test as a user without sudo succeeded?"
	fi
	printf '%s\n' "$out" | tail -n 3 | tee -a "$LOG" >&2
	[[ $out == *sudo* && $out != *"apt-get update failed"* ]] || die "[$MODE] the failure does not name sudo"
	step "make test (first command)" dev "cd ~/uum && make test"
	check_run dev /home/dev/uum
	stop_twice dev /home/dev/uum
	cleanup
}

mode=${1:-all}
base
case $mode in
ci) check_ci ;;
root) check_root ;;
user) check_user ;;
all)
	check_ci
	check_root
	check_user
	;;
*) die "usage: $0 [ci|root|user|all]" ;;
esac
say "PASS ($mode) at $COMMIT"
