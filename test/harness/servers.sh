# Test harness (sourced by bash): starts a private PostgreSQL cluster with the jobbuf worker
# preloaded and a private redis-server, each on a free loopback port, and stops both on exit.
#
#   source test/harness/servers.sh
#   jb_start_redis            # JB_REDIS_PORT, JB_REDIS_PID, jb_redis (redis-cli wrapper)
#   jb_start_postgres [conf]  # JB_PGPORT, JB_PGHOST, jb_psql (psql wrapper), database jobbuf_test
#   jb_stop_all               # also run automatically on EXIT
#   jb_start_servers CLEANUP [redis options]  # both, with CLEANUP trapped on EXIT
#   jb_stop_pids PID...       # stops background processes a script started (consumers, workers)
#   jb_on_free_port VAR START [ARGS...]  # any other server on a free port: START ARGS... PORT, again on
#                                        # another port when that one was taken (jb_port_taken)
# JB_REDIS=valkey runs Valkey instead of Redis (redis_flavor.sh).
#
# initdb refuses to run as root, so the cluster runs as the postgres user (CI runs as root).

# shellcheck source=redis_flavor.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_flavor.sh"

JB_PGBIN=${JB_PGBIN:-$(pg_config --bindir)}
JB_DB=${JB_DB:-jobbuf_test}

# jb_free_port: a port nobody listens on now. Another process may take it before the caller binds
# it: start servers through jb_on_free_port, which starts again on another port then.
jb_free_port() {
  ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close'
}

# What a START of jb_on_free_port returns when its server could not bind the port (EADDRINUSE).
JB_PORT_TAKEN=98

# jb_on_free_port VAR START [ARGS...]: sets VAR to a free loopback port and runs START ARGS... PORT,
# which starts a server on PORT and returns 0 once that server (not another) answers there,
# JB_PORT_TAKEN when the server could not bind PORT (jb_port_taken), anything else on another
# failure. Between jb_free_port and the server's bind, the port can be taken (another test's
# server, a connection's local port: the kernel hands out the same range), more likely on a busy
# machine: START then runs again on a new port, up to 5 times. Every test starts its servers so.
jb_on_free_port() {
  local _jb_var=$1 _jb_try _jb_rc
  shift
  for _jb_try in 1 2 3 4 5; do
    printf -v "$_jb_var" %s "$(jb_free_port)"
    _jb_rc=0
    "$@" "${!_jb_var}" || _jb_rc=$?
    [ "$_jb_rc" = "$JB_PORT_TAKEN" ] || return "$_jb_rc"
    echo "port ${!_jb_var} was taken before the server bound it: starting again on another port" >&2
  done
  return 1
}

# jb_log_size LOG: its size in bytes (0 when absent), to pass to jb_port_taken as FROM.
jb_log_size() {
  stat -c %s "$1" 2>/dev/null || echo 0
}

# jb_port_taken LOG [FROM]: the server logging to LOG said, after byte FROM, that its address was in
# use (strerror(EADDRINUSE): Redis's bind, PostgreSQL's bind or listen, Ruby, and Go in lower case).
jb_port_taken() {
  tail -c +"$(( ${2:-0} + 1 ))" "$1" 2>/dev/null | grep -qi 'address already in use'
}

# jb_redis_started PID LOG FROM [redis-cli options...]: waits (10 s) until the redis-server started
# as PID answers redis-cli OPTIONS as that process (not another that took its port first, which
# may never answer: each try has a timeout); JB_PORT_TAKEN when it exited because its port was
# taken (LOG after byte FROM says so), 1 otherwise.
jb_redis_started() {
  local pid=$1 log=$2 from=$3 _
  shift 3
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$(timeout 5 redis-cli "$@" INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')" = "$pid" ] && return 0
    sleep 0.05
  done
  if ! kill -0 "$pid" 2>/dev/null && jb_port_taken "$log" "$from"; then
    return "$JB_PORT_TAKEN"
  fi
  echo "redis-server (pid $pid) did not start: $(tail -n 3 "$log" 2>/dev/null)" >&2
  return 1
}

# jb_listening PID PORT: PID listens on 127.0.0.1:PORT (for a server that is not Redis).
jb_listening() {
  ss -Htlnp "sport = :$2" 2>/dev/null | grep -q "pid=$1,"
}

jb_init_run_dir() {
  if [ -z "${JB_RUN:-}" ]; then
    JB_RUN=$(mktemp -d /tmp/jobbuf-test.XXXXXX)
    chmod 755 "$JB_RUN"
    trap jb_stop_all EXIT
  fi
}

jb_as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# jb_start_redis [redis-server options...]
jb_start_redis() {
  jb_init_run_dir
  mkdir -p "$JB_RUN/redis"
  JB_REDIS_ARGS=("$@")
  jb_on_free_port JB_REDIS_PORT jb_run_redis
}

# jb_run_redis: redis-server on JB_REDIS_PORT with JB_REDIS_ARGS, its files in $JB_RUN/redis.
jb_run_redis() {
  local from
  from=$(jb_log_size "$JB_RUN/redis/redis.log")
  redis-server --port "$JB_REDIS_PORT" --bind 127.0.0.1 --dir "$JB_RUN/redis" \
    --save '' --appendonly no --daemonize no --logfile "$JB_RUN/redis/redis.log" "${JB_REDIS_ARGS[@]}" &
  JB_REDIS_PID=$!
  jb_redis_started "$JB_REDIS_PID" "$JB_RUN/redis/redis.log" "$from" -p "$JB_REDIS_PORT"
}

# Restarts redis on the same port (same data directory, so an append-only file is replayed).
jb_restart_redis() {
  jb_run_redis
}

jb_redis() {
  redis-cli -p "$JB_REDIS_PORT" "$@"
}

# jb_start_postgres ["extra postgresql.conf lines"]
jb_start_postgres() {
  jb_init_run_dir
  JB_PGHOST=$JB_RUN
  JB_PGDATA=$JB_RUN/pgdata
  chown postgres "$JB_RUN" 2>/dev/null || true
  jb_as_postgres "$JB_PGBIN/initdb" -D "$JB_PGDATA" -U postgres --auth=trust --no-sync >"$JB_RUN/initdb.log" 2>&1 || {
    cat "$JB_RUN/initdb.log" >&2; return 1; }
  cat >>"$JB_PGDATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$JB_RUN'
shared_preload_libraries = 'jobbuf'
jobbuf.database = '$JB_DB'
jobbuf.redis_url = 'redis://127.0.0.1:${JB_REDIS_PORT:-6379}/0'
jobbuf.poll_interval = '1s'
fsync = off
log_min_messages = warning
${1:-}
CONF
  jb_on_free_port JB_PGPORT jb_pg_start "$JB_PGDATA" "$JB_RUN/postgres.log" || return 1
  jb_psql_db postgres -q -c "CREATE DATABASE $JB_DB" >/dev/null
  jb_psql -q -c "CREATE EXTENSION jobbuf" >/dev/null
}

# jb_pg_start DATA LOG PORT: starts the cluster in DATA (pg_ctl start, logging to LOG) on PORT, the
# last port line of its postgresql.conf; JB_PORT_TAKEN when PORT was taken.
jb_pg_start() {
  local from
  from=$(jb_log_size "$2")
  echo "port = $3" >>"$1/postgresql.conf"
  jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$1" -l "$2" -w -t 60 start >/dev/null && return 0
  jb_port_taken "$2" "$from" && return "$JB_PORT_TAKEN"
  return 1
}

jb_pg_ctl() {
  jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$JB_PGDATA" -l "$JB_RUN/postgres.log" -w -t 60 "$@" >/dev/null
}

jb_psql_db() {
  local db=$1; shift
  psql -X -v ON_ERROR_STOP=1 -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$db" "$@"
}

jb_psql() {
  jb_psql_db "$JB_DB" "$@"
}

# Prints a single value.
jb_sql() {
  jb_psql -qtAX -c "$1"
}

jb_stop_all() {
  if [ -n "${JB_PGDATA:-}" ] && [ -f "$JB_PGDATA/postmaster.pid" ]; then
    jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$JB_PGDATA" -m immediate stop >/dev/null 2>&1 || true
  fi
  if [ -n "${JB_REDIS_PID:-}" ]; then
    kill -CONT "$JB_REDIS_PID" 2>/dev/null || true
    kill "$JB_REDIS_PID" 2>/dev/null || true
    wait "$JB_REDIS_PID" 2>/dev/null || true
  fi
  if [ -n "${JB_RUN:-}" ] && [ -z "${JB_KEEP:-}" ]; then
    rm -rf "$JB_RUN"
  fi
}

# jb_start_servers CLEANUP [redis-server options...]: jb_start_redis and jb_start_postgres, then
# CLEANUP (a command that ends with jb_stop_all) runs on EXIT, and SIGINT / SIGTERM exit 130.
jb_start_servers() {
  local cleanup=$1
  shift
  jb_start_redis "$@"
  jb_start_postgres
  # shellcheck disable=SC2064  # the command named now, run at exit
  trap "$cleanup" EXIT
  trap 'exit 130' INT TERM
}

# jb_stop_pids PID...: asks each process to stop (SIGTERM), gives each 5 s, then kills it; reaps
# them all.
jb_stop_pids() {
  local pid
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# jb_wait_until "<shell condition>" [timeout seconds, fractions allowed]: polls every 20 ms.
jb_wait_until() {
  local cond=$1 timeout=${2:-10} whole fraction
  whole=${timeout%%.*}; fraction=${timeout#"$whole"}; fraction=${fraction#.}000000000
  local deadline=$(( $(date +%s%N) + ${whole:-0} * 1000000000 + 10#${fraction:0:9} ))
  while [ "$(date +%s%N)" -lt "$deadline" ]; do
    eval "$cond" && return 0
    sleep 0.02
  done
  return 1
}
