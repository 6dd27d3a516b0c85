#!/usr/bin/env bash
# The services the delivery tests run against: a Redis server and a PostgreSQL cluster on loopback.
#
#   scripts/services.sh          install what is missing, start both (idempotent), print their URLs
#   scripts/services.sh stop     stop both
#   scripts/services.sh status   say whether each answers
#
# Only the URLs go to stdout, one NAME=value a line, so `export $(scripts/services.sh)` works;
# progress goes to stderr. Data lives under $MCP_SERVICES_DIR (default /tmp/mcp-services) and is
# disposable: Redis keeps nothing on disk and the cluster only holds test databases.
set -euo pipefail

DIR=${MCP_SERVICES_DIR:-/tmp/mcp-services}
REDIS_PORT=${MCP_REDIS_PORT:-6390}
PG_PORT=${MCP_PG_PORT:-5440}
PG_DB=mcp_test
HOST=127.0.0.1

say() { echo "services: $*" >&2; }
die() {
	say "$*"
	exit 1
}

# The newest installed PostgreSQL's bin directory (Debian keeps them out of PATH).
pg_bin() {
	local dir
	dir=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	if [[ -n $dir && -x $dir/initdb ]]; then
		echo "$dir"
	elif command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(command -v initdb)"
	fi
}

# PostgreSQL refuses to run as root: as root, run its tools as the postgres user.
as_pg() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

install_missing() {
	local packages=()
	command -v redis-server >/dev/null || packages+=(redis-server)
	[[ -n $(pg_bin) ]] || packages+=(postgresql)
	((${#packages[@]})) || return 0
	[[ $(id -u) == 0 ]] || die "need ${packages[*]}; run as root to install them with apt-get"
	say "installing ${packages[*]}"
	# Package lists may be absent or stale on a fresh machine; refresh them once, here only.
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	# The packages may start their own services on the default ports; these use other ones.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >&2
	command -v redis-server >/dev/null || die "redis-server still missing after install"
	[[ -n $(pg_bin) ]] || die "PostgreSQL still missing after install"
}

redis_up() { redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

start_redis() {
	if redis_up; then
		say "redis already answers on $HOST:$REDIS_PORT"
		return
	fi
	mkdir -p "$DIR/redis"
	redis-server --bind "$HOST" --port "$REDIS_PORT" --daemonize yes \
		--dir "$DIR/redis" --pidfile "$DIR/redis/redis.pid" --logfile "$DIR/redis/redis.log" \
		--save "" --appendonly no >&2
	for _ in $(seq 100); do
		redis_up && {
			say "redis started on $HOST:$REDIS_PORT"
			return
		}
		sleep 0.1
	done
	die "redis did not answer within 10s; see $DIR/redis/redis.log"
}

pg_up() { "$(pg_bin)/pg_isready" -q -h "$HOST" -p "$PG_PORT"; }

start_postgres() {
	local bin data=$DIR/pg/data
	bin=$(pg_bin)
	mkdir -p "$DIR"
	chmod 755 "$DIR"
	if [[ $(id -u) == 0 ]]; then
		install -d -m 700 -o postgres -g postgres "$DIR/pg"
	else
		install -d -m 700 "$DIR/pg"
	fi
	if ! pg_up; then
		if [[ ! -f $data/PG_VERSION ]]; then
			say "creating a PostgreSQL cluster in $data"
			as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null
		fi
		# A stale pid file from a killed server would stop pg_ctl from starting a new one.
		if [[ -f $data/postmaster.pid ]] && ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
			rm -f "$data/postmaster.pid"
		fi
		as_pg "$bin/pg_ctl" -D "$data" -l "$DIR/pg/postgres.log" -w -t 30 \
			-o "-h $HOST -p $PG_PORT -k $DIR/pg -c fsync=off -c synchronous_commit=off" start >/dev/null ||
			die "PostgreSQL did not start; see $DIR/pg/postgres.log"
		say "postgres started on $HOST:$PG_PORT"
	else
		say "postgres already answers on $HOST:$PG_PORT"
	fi
	local psql=("$bin/psql" -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAq)
	if [[ -z $("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'") ]]; then
		"${psql[@]}" -c "CREATE DATABASE $PG_DB" >/dev/null
		say "created database $PG_DB"
	fi
}

stop_all() {
	if redis_up; then
		redis-cli -h "$HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
		say "redis stopped"
	fi
	local bin
	bin=$(pg_bin)
	if [[ -n $bin && -f $DIR/pg/data/PG_VERSION ]] && pg_up; then
		as_pg "$bin/pg_ctl" -D "$DIR/pg/data" -m fast -w -t 30 stop >/dev/null
		say "postgres stopped"
	fi
}

urls() {
	echo "REDIS_URL=redis://$HOST:$REDIS_PORT/0"
	echo "TEST_DATABASE_URL=postgres://postgres@$HOST:$PG_PORT/$PG_DB"
}

case ${1:-start} in
start)
	install_missing
	start_redis
	start_postgres
	urls
	;;
stop) stop_all ;;
status)
	if redis_up; then say "redis up on $HOST:$REDIS_PORT"; else say "redis down"; fi
	if [[ -n $(pg_bin) ]] && pg_up; then say "postgres up on $HOST:$PG_PORT"; else say "postgres down"; fi
	;;
*) die "usage: $0 [start|stop|status]" ;;
esac
