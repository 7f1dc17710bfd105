# Shared helpers for the fault-injection scripts in test/faults (sourced, not run: it lives in
# tools/ so that the suite runner, which runs test/faults/*.sh, does not pick it up).
#
#   source "$(dirname "$0")/tools/lib.sh"
#   faults_start "redis-server args" "extra postgresql.conf lines"
#     (= faults_start_redis "redis-server args"; faults_start_postgres "extra postgresql.conf lines")
#   the checks of test/harness/checks.sh (say, pass, fail, check, expect_eq, ...)
#   the waits of test/harness/preconditions.sh (set_and_reload, wait_delivered, tx_open, ...)
#   faults_done                           # summary; exit status 1 when a check failed
#
# Every process a script starts is registered (track_pid) and stopped on EXIT, whatever the outcome.
set -uo pipefail

FAULTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
FAULTS_PIDS=()
FAULTS_CLEANUPS=()

# shellcheck source=../../harness/servers.sh
source "$FAULTS_ROOT/test/harness/servers.sh"
# shellcheck source=../../harness/checks.sh
source "$FAULTS_ROOT/test/harness/checks.sh"
# shellcheck source=../../harness/preconditions.sh
source "$FAULTS_ROOT/test/harness/preconditions.sh"

# track_pid <pid>: stopped (CONT then TERM, then KILL) on exit.
track_pid() { FAULTS_PIDS+=("$1"); }
# on_exit "<command>": run on exit, before the harness stops its servers (last registered first).
on_exit() { FAULTS_CLEANUPS=("$1" "${FAULTS_CLEANUPS[@]}"); }

faults_cleanup() {
  local pid cmd
  for cmd in "${FAULTS_CLEANUPS[@]}"; do eval "$cmd" >/dev/null 2>&1 || true; done
  for pid in "${FAULTS_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ -n "${JB_REDIS_PID:-}" ] && kill -CONT "$JB_REDIS_PID" 2>/dev/null
  jb_stop_all
}

# faults_start "<redis-server args>" "<extra postgresql.conf lines>"
faults_start() {
  faults_start_redis "${1:-}"
  faults_start_postgres "${2:-}"
}

# faults_start_redis "<redis-server args>" then faults_start_postgres "<conf lines>": the two
# halves of faults_start, for a script that starts servers of its own between them (whose ports
# the Postgres configuration names).
faults_start_redis() {
  local redis_args=()
  # shellcheck disable=SC2206
  [ -n "${1:-}" ] && redis_args=($1)
  jb_init_run_dir
  trap faults_cleanup EXIT
  jb_start_redis "${redis_args[@]}" || exit 1
}

faults_start_postgres() {
  jb_start_postgres "${1:-}" || exit 1
  if ! wait_worker_running 20; then
    echo "  the drain worker did not start; server log:" >&2
    tail -n 30 "$JB_RUN/postgres.log" >&2
    exit 1
  fi
}

# start_clone: a pg_basebackup of the running original in $JB_RUN/clone (CLONE), started beside it
# as a second primary with the copied postgresql.conf on a free port (CLONE_PORT), stopped on exit;
# a failure ends the script. clone_sql QUERY and clone_ctl PG_CTL-ARGS... reach it.
start_clone() {
  CLONE=$JB_RUN/clone
  on_exit "[ -f '$CLONE/postmaster.pid' ] && jb_as_postgres '$JB_PGBIN/pg_ctl' -D '$CLONE' -m immediate stop"
  if ! jb_as_postgres "$JB_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$JB_PGPORT" -U postgres -D "$CLONE" -X stream -c fast \
      >"$JB_RUN/basebackup.log" 2>&1; then
    fail "pg_basebackup of the running original"; cat "$JB_RUN/basebackup.log"; faults_done
  fi
  jb_on_free_port CLONE_PORT jb_pg_start "$CLONE" "$JB_RUN/clone.log" ||
    { fail "the clone starts"; tail -n 20 "$JB_RUN/clone.log"; faults_done; }
}
clone_sql() { psql -X -qtAX -v ON_ERROR_STOP=1 -h "$JB_RUN" -p "$CLONE_PORT" -U postgres -d "$JB_DB" -c "$1"; }
clone_ctl() { jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$CLONE" -l "$JB_RUN/clone.log" -w -t 60 "$@" >/dev/null; }

postmaster_pid() { head -n 1 "$JB_PGDATA/postmaster.pid" 2>/dev/null; }

# worker_pid: the drain worker of this cluster (from jobbuf_worker_status, else from ps).
worker_pid() {
  local pid
  pid=$(jb_sql "SELECT pid FROM jobbuf_worker_status()" 2>/dev/null)
  if [ -z "$pid" ]; then
    pid=$(children_named "jobbuf drain worker" | head -n 1)
  fi
  echo "$pid"
}

# children_named <title>: pids of this cluster's postmaster children whose title contains <title>.
children_named() {
  local pm
  pm=$(postmaster_pid)
  [ -n "$pm" ] || return 0
  ps -o pid=,args= --ppid "$pm" 2>/dev/null | grep -F -- "$1" | awk '{print $1}'
}

# count_delivery COMMITTED FOUND: compares the job numbers committed in Postgres (file
# COMMITTED, one a line) with those Redis holds (file FOUND, one a line per element): sets lost
# (committed, not in Redis), duplicated (in Redis twice) and phantom (in Redis, never committed).
count_delivery() {
  sort "$1" >"$1.sorted"
  sort -u "$2" >"$2.unique"
  lost=$(comm -23 "$1.sorted" "$2.unique" | wc -l)
  phantom=$(comm -13 "$1.sorted" "$2.unique" | wc -l)
  duplicated=$(( $(wc -l <"$2") - $(wc -l <"$2.unique") ))
}

faults_done() { checks_done; }
